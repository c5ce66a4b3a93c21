"""A worker host's janitor duty for its own Colab account: reconciliation wherever a login is.

The janitor acts on an account's VMs only through that account's login (another account's `colab
sessions` cannot list them, and its `colab stop` cannot reach them), and beat runs on one host
with at most one login. The hosts sure to hold each account's login are that account's workers,
so each GPU worker runs, from its main process (its prober's tick starts a thread; never its one
pool slot, which a multi-hour job holds), its account's janitor pass when no pass of that
account started within one and a half janitor intervals: where beat runs the account's janitor
(a deployment with one account, as before) the duty never steps in; an account without one gets
its passes from its own workers, its orphans, retained VMs and `[?]` assignments seen with its
login. The pass takes the account's lock and checks the time of its last pass again under it, so
two workers of one account never run it twice. (The other way, a beat task routed per account,
would need beat to know every account and a consumer per account that no long job holds.)

A worker drained for a host failure (its login, its CLI) leaves the duty to its account's other
hosts until its probe finds it healthy; one drained by hand keeps it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import redis

from worker.errors import ColabqError
from worker.fleet import health
from worker.janitor.run import JanitorReport
from worker.records.ledger import Ledger

# The duty steps in when the account's last pass started this many janitor intervals ago.
IDLE_INTERVALS = 1.5

RunPass = Callable[[float], JanitorReport]  # (unless a pass ran within s) -> its report


class JanitorDuty:
    """Ticked by the worker's prober (`worker.fleet.prober`); a pass runs in a thread of its
    own, so a long one (an orphan's results recovered, then its release verified) never delays
    the prober's other duties."""

    def __init__(
        self,
        ledger: Ledger,
        worker: str,
        account: str,
        interval_s: float,
        run_pass: RunPass,
        say: Callable[[str], None] = lambda line: print(line, flush=True),
    ) -> None:
        self.ledger, self.worker, self.account = ledger, worker, account
        self.idle_s = IDLE_INTERVALS * interval_s
        self.run_pass, self.say = run_pass, say
        # A worker that just started gives the account's beat (or its other hosts) a chance.
        self.not_before = time.time() + self.idle_s
        self._running: threading.Thread | None = None

    def tick(self, now: float) -> threading.Thread | None:
        """Start the account's pass if it is due and none of this worker's runs."""
        if self._running is not None and self._running.is_alive():
            return None
        if not self.due(now):
            return None
        self._running = threading.Thread(target=self.run, name="colabq-janitor", daemon=True)
        self._running.start()
        return self._running

    def due(self, now: float) -> bool:
        """Whether this worker should try the account's pass now (one round trip)."""
        if now < self.not_before:
            return False
        k, r = self.ledger.keys, self.ledger.r
        last = r.hget(k.janitor_passes(), self.account)
        if last is not None and now - float(last) < self.idle_s:
            return False
        h = health.read(r, k, self.worker)
        return h is None or h.manual

    def run(self) -> JanitorReport | None:
        """One pass (skipped under the lock if another host's started meanwhile); what it did is
        printed to the worker's log."""
        try:
            report = self.run_pass(self.idle_s)
        except (redis.RedisError, ColabqError, OSError) as exc:
            self.say(f"colabq worker {self.worker}: janitor pass failed: {exc}")
            return None
        if report.ran and any(not r.did.startswith("left alone") for r in report.rows):
            for line in report.lines():
                self.say(f"colabq worker {self.worker}: {line}")
        return report
