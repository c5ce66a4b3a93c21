"""Running the gate behind its lease: `colabq gate` (a process of its own) and every GPU worker
(a thread of its main process, never its pool slot) run this same loop; the one that holds the
lease serves (`serve.Gate.step`), the others stand by and look again every `STANDBY_S`.

A gate that takes the lease over looks at once for requests a dead gate left pending. Redis out
of reach is waited for (the requests stay in their streams); the lease is given back when the
loop stops, so another gate takes over at once rather than after its expiry.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import redis

from worker.errors import ColabqError
from worker.gate.ops import GateContext
from worker.gate.serve import Gate
from worker.records.ownership import hold_gate_lease, release_gate_lease

if TYPE_CHECKING:
    from celery import Celery

    from worker.records.ledger import Ledger
    from worker.settings import Settings

LEASE_S = 15.0  # a gate that stopped renewing is replaced after this long
RENEW_S = LEASE_S / 3
STANDBY_S = 2.0  # how often a gate without the lease looks whether it is free


class GateDuty:
    """The loop around a `Gate`; `run` until `stop` is set (a thread or a process's main)."""

    def __init__(self, gate: Gate, say: Callable[[str], None]) -> None:
        self.gate, self.say = gate, say
        self.stop = threading.Event()
        self.serving = False
        self.looked = 0  # times it asked for the lease
        self._renewed_at = float("-inf")
        self._thread: threading.Thread | None = None

    def start(self) -> threading.Thread:
        """Run in a daemon thread (a worker's duty)."""
        self._thread = threading.Thread(target=self.run, name="colabq-gate", daemon=True)
        self._thread.start()
        return self._thread

    def close(self, timeout_s: float = 5.0) -> None:
        self.stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                try:
                    if not self.tick():
                        self.stop.wait(STANDBY_S)
                except (redis.ConnectionError, redis.TimeoutError):
                    self.stop.wait(1.0)
                except (redis.RedisError, ColabqError) as exc:
                    self.say(f"colabq gate: {str(exc).splitlines()[0]}; trying again.")
                    self.stop.wait(STANDBY_S)
        finally:
            self._give_back()

    def tick(self) -> bool:
        """Serve one step if this gate holds the lease (taking or renewing it); False if
        another gate holds it."""
        mono = time.monotonic()
        if mono - self._renewed_at >= RENEW_S or not self.serving:
            self.looked += 1
            held = hold_gate_lease(self.gate.ctx.ledger, self.gate.consumer, LEASE_S)
            if not held:
                if self.serving:
                    self.say(f"colabq gate {self.gate.consumer}: another gate serves now.")
                self.serving = False
                return False
            self._renewed_at = mono
            if not self.serving:
                self.serving = True
                self.gate.take_over()
                self.say(f"colabq gate {self.gate.consumer}: serving requests.")
        self.gate.step(time.time())
        return True

    def _give_back(self) -> None:
        if not self.serving:
            return
        with contextlib.suppress(redis.RedisError):  # else it expires
            release_gate_lease(self.gate.ctx.ledger, self.gate.consumer)
        self.serving = False


def build_gate_duty(
    settings: Settings,
    ledger: Ledger,
    app: Celery,
    say: Callable[[str], None],
    *,
    block_ms: int = 1000,
) -> GateDuty:
    """The gate for `settings`' deployment, sending with `app`, saying what it does with `say`."""
    gate = Gate(GateContext(ledger, app, settings), block_ms=block_ms,
                refresh_s=settings.gate_refresh_s, say=say)  # fmt: skip
    return GateDuty(gate, say)
