"""An owner's lease on a job: a heartbeat thread that renews the per-job lock's TTL, and the
fence every side effect of the owner passes first.

If the owner dies the lease expires, and the janitor finds the job in `Keys.leases()`. Renewals
use their own Redis client with a short retry budget, so an outage never stalls the thread: it
keeps beating the owner's local phase file (the watchdog's sign of life) and retries the lease.
An outage longer than the TTL lets the lock expire; the next renewal takes it back if the job
still names this owner. If someone else owns it now, the lease is lost for good.

The fence tells the two apart: `LeaseLost` (another owner holds the job: stop for good) and its
subclass `LeaseUnconfirmed` (no renewal got through: Redis is away, and the owner may wait for
it and `fence` again).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType

from worker.errors import ColabqError
from worker.records.ledger import Ledger
from worker.records.ownership import Renewal

log = logging.getLogger(__name__)


class LeaseLost(ColabqError):
    """This owner may no longer act for the job: another owns it, or Redis stayed away."""

    hint = "The job's session is left to its watchdog; the janitor adopts the job."


class LeaseUnconfirmed(LeaseLost):
    """No renewal got through within the wait (Redis unreachable): the lease may still be this
    owner's once Redis answers again, or it may be another's; only a later `fence` can tell."""


class Heartbeat:
    def __init__(
        self,
        ledger: Ledger,
        job_id: str,
        owner: str,
        *,
        interval_s: float,
        ttl_s: float,
        on_beat: Callable[[float], None] | None = None,
        restore: Callable[[], bool] | None = None,
    ) -> None:
        self.ledger, self.job_id, self.owner = ledger, job_id, owner
        self.interval_s, self.ttl_s = interval_s, ttl_s
        self.on_beat = on_beat
        # Writes the job's record again when Redis lost it (a restart without persistence):
        # the owner, alive and holding the spec, is the one that can.
        self.restore = restore
        self._stop = threading.Event()
        self._renewed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{job_id}", daemon=True)
        self._owner_thread = threading.current_thread()
        self.lost = threading.Event()
        # Counted from the claim or adoption that made us the owner, which just succeeded.
        self.renewed_at = time.monotonic()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if not self._owner_thread.is_alive():
                return
            if self.on_beat is not None:
                try:
                    self.on_beat(time.time())
                except OSError:
                    log.exception("owner beat for job %s failed", self.job_id)
            self.renew_once()
            if self.lost.is_set():
                return

    def renew_once(self) -> None:
        try:
            got = self.ledger.renew(self.job_id, self.owner, self.ttl_s)
            if got is Renewal.RECORD_GONE and self.restore is not None:
                log.error("job %s: its record is gone from Redis; writing it again", self.job_id)
                got = (
                    Renewal.RENEWED
                    if self.restore()
                    else self.ledger.renew(self.job_id, self.owner, self.ttl_s)
                )
        except Exception as exc:  # Redis away: the fence decides when that matters
            log.warning("lease renewal for job %s failed: %s", self.job_id, exc)
            return
        if got is not Renewal.RENEWED:
            log.error("lease on job %s lost: another owner holds it", self.job_id)
            self.lost.set()
        else:
            with self._renewed:
                self.renewed_at = time.monotonic()
                self._renewed.notify_all()

    def valid(self) -> bool:
        return not self.lost.is_set() and time.monotonic() - self.renewed_at < self.ttl_s

    def fence(self, wait_s: float) -> None:
        """Before a side effect: pass if the lease is good; wait up to `wait_s` for a renewal
        through an outage; otherwise raise LeaseLost, or LeaseUnconfirmed when no renewal got
        through (Redis away). Either way the caller must not act."""
        deadline = time.monotonic() + wait_s
        with self._renewed:
            while not self.valid():
                if self.lost.is_set():
                    raise LeaseLost(f"Job {self.job_id} is owned by another runner now.")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise LeaseUnconfirmed(
                        f"The lease on job {self.job_id} could not be renewed for "
                        f"{self.ttl_s + wait_s:.0f}s (Redis unreachable)."
                    )
                self._renewed.wait(min(left, self.interval_s))

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
