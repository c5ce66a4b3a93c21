"""The real gate (`worker.gate`) in a thread of the test process, for tests where no worker
runs one: every request a test's command or API call makes is carried out by the same loop, lease
and code as in a deployment. Its reads block 20 ms at a time (a deployment's gate blocks for a
second; the test Redis ends a blocked read within 10 ms of its timeout, `tests/conftest.py`),
so stopping it is quick."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import redis

from worker.celery_app import build_app
from worker.deps import build_ledger
from worker.gate.duty import GateDuty, build_gate_duty
from worker.settings import Settings


@contextlib.contextmanager
def running_gate(settings: Settings) -> Iterator[GateDuty]:
    """A gate serving `settings`' deployment until the block ends (it holds the lease then)."""
    ledger = build_ledger(settings, retry_s=0)
    app = build_app(settings)
    duty = build_gate_duty(settings, ledger, app, lambda line: None, block_ms=20)
    duty.start()
    deadline = time.monotonic() + 30
    while not duty.serving:
        assert time.monotonic() < deadline, "the test's gate never took its lease"
        time.sleep(0.01)
    try:
        yield duty
    finally:
        duty.close()
        app.close()
        client: redis.Redis = ledger.r
        for key in client.scan_iter(f"{settings.key_prefix}:u:*"):
            client.delete(key)
        client.close()


def written(client: redis.Redis, prefix: str) -> list[bytes]:
    """The keys under `prefix` that something wrote, leaving out the gate's own: its lease and
    the users' request streams it made, when empty (no request waits in them)."""
    out = []
    for key in client.scan_iter(f"{prefix}*"):
        name = key.decode()
        if name == f"{prefix}:gate:lease":
            continue
        if name.endswith(":requests") and name.startswith(f"{prefix}:u:") and not client.xlen(key):
            continue
        out.append(key)
    return out
