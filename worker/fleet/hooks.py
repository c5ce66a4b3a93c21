"""What a worker's task does for the fleet around a job, as two side effects the plain
`execute_job` takes: send a job's message again (it was put back), and drain this worker (a
host failure) — its health record, and its consumers of the GPU queues cancelled through
Celery's remote control. `build_fleet_hooks` makes the real ones; tests pass their own."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from celery import Celery

from worker.fleet import health
from worker.fleet.dispatch import send_job, stop_consuming
from worker.records.ledger import Ledger
from worker.settings import Settings
from worker.spec import JobSpec, queue_for


def _nothing(*_: object) -> None:
    return None


@dataclass(frozen=True)
class FleetHooks:
    resend: Callable[[JobSpec], None] = _nothing
    # A host failure: drain with this reason (`None`: already drained, stop consuming again).
    drain: Callable[[str | None], None] = _nothing


def worker_queues(ledger: Ledger, settings: Settings, name: str) -> list[str]:
    """The GPU queues `name` consumes, from its card (what it was started with), else every
    queue of its settings."""
    try:
        card = json.loads(ledger.r.get(ledger.keys.worker_card(name)) or "{}")
        queues = [str(q) for q in card.get("queues", [])]
    except (ValueError, TypeError, AttributeError):
        queues = []
    return queues or [queue_for(g, settings.queue_prefix) for g in settings.worker_gpus]


def build_fleet_hooks(app: Celery, settings: Settings, ledger: Ledger, name: str) -> FleetHooks:
    def resend(spec: JobSpec) -> None:
        send_job(app, spec, settings.queue_prefix)

    def drain(reason: str | None) -> None:
        if reason is not None:
            h = health.note_failure(
                ledger.r, ledger.keys, name, reason, time.time(),
                probe_s=settings.drain_probe_s, probe_max_s=settings.drain_probe_max_s,
            )  # fmt: skip
            print(f"colabq worker {name}: drained ({h.failures} host failure(s) in a row): "
                  f"{reason}", flush=True)  # fmt: skip
        stop_consuming(app, name, worker_queues(ledger, settings, name))

    return FleetHooks(resend=resend, drain=drain)
