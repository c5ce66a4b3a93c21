"""The fleet survives its members: every failure classed by cause (`causes`), jobs put back
untouched when a host fails or Colab has no GPU now (`putback`), waits for capacity with capped
backoff (`capacity`), a broken worker drained and probed until healthy (`health`, `prober`), and
one way to send a job's message to every queue that may serve it (`dispatch`)."""
