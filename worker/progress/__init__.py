"""A run's progress, read from its console as the lines pass (issue 27): how far it got, at what
rate, when it will end, and whether it ends past its own time limit.

- `parse`: what one console line (or a bar's latest `\\r` update) says: a tqdm bar, Keras'
  `Epoch N/M` and step bar, Lightning's `Epoch N: 45%|...` bar, Hugging Face Trainer's
  `{'loss': ..., 'epoch': 1.25}`, or `colabq-progress step=N total=M`. Pure.
- `track`: the run's overall position from those (epoch context, nested and restarting bars).
- `rate`: the measured rate and the end it projects. Pure.
- `record`: the stored reading (`exec_progress` in the job's watch hash), written by the attach
  client with the lines it came from and checked wherever it is read back.
- `feed`: the attach client's side (cheap per chunk, a write every few seconds at most).
- `limit`: the projection against the job's own time limit, and the warning's words.
- `guard`: the owner's side: the overrun warning once per segment (an event and, through the
  notifier, a notification), and the progress Flower shows.
- `words`: the reading in words and JSON for `status`, the API and the final report.
"""
