"""colabq's own lines in a job's log stream, shipped from a thread of their own.

An owner writes what it does ("stopping …", "attached again …") to the job's log; writing must
never make it wait on Redis: a release that logs before it stops must stop now, outage or not.
Lines queue in order and go out in batches; through an outage they wait (and are printed to the
process's stderr, so the worker's own log has them at once).
"""

from __future__ import annotations

import logging
import queue
import sys
import threading

from worker.records.ledger import Ledger

log = logging.getLogger(__name__)
_CLOSE = object()


class LogShipper:
    def __init__(self, ledger: Ledger, job_id: str, stream: str = "colabq") -> None:
        self.ledger, self.job_id, self.stream = ledger, job_id, stream
        self._q: queue.Queue[object] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=f"log-{job_id}", daemon=True)
        self._thread.start()

    def __call__(self, text: str) -> None:
        self._q.put(text)

    def close(self, timeout_s: float = 10.0) -> None:
        """Ship what is queued (waiting at most `timeout_s`), then stop."""
        self._q.put(_CLOSE)
        self._thread.join(timeout=timeout_s)

    def _run(self) -> None:
        while True:
            batch = [self._q.get()]
            while not self._q.empty() and len(batch) < 500:
                batch.append(self._q.get_nowait())
            lines = [b for b in batch if isinstance(b, str)]
            if lines:
                self._ship(lines)
            if any(b is _CLOSE for b in batch):
                return

    def _ship(self, lines: list[str]) -> None:
        try:
            self.ledger.append_logs(self.job_id, lines, self.stream)
        except Exception as exc:  # Redis stayed away past the retries: keep them on stderr
            for line in lines:
                print(f"colabq {self.job_id} (not in Redis: {exc}): {line}", file=sys.stderr)
