"""The worker's lease on a job: a heartbeat thread that renews the per-job lock's TTL.

If the worker dies the lease expires, and the janitor finds the job in `Keys.leases()`.
"""

from __future__ import annotations

import logging
import threading
from types import TracebackType

from worker.records.ledger import Ledger

log = logging.getLogger(__name__)


class Heartbeat:
    def __init__(self, ledger: Ledger, job_id: str, owner: str, *, interval_s: float, ttl_s: float):
        self.ledger, self.job_id, self.owner = ledger, job_id, owner
        self.interval_s, self.ttl_s = interval_s, ttl_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{job_id}", daemon=True)
        self.lost = threading.Event()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                if not self.ledger.renew(self.job_id, self.owner, self.ttl_s):
                    log.error("lease on job %s lost", self.job_id)
                    self.lost.set()
                    return
            except Exception:  # a Redis blip: keep trying until the TTL says otherwise
                log.exception("heartbeat for job %s failed", self.job_id)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
