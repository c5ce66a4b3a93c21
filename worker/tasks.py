"""Thin Celery tasks: decode the spec, take the job's lock, call the runner, settle.

All logic lives in plain functions (`execute_job`) that take their side effects as arguments.
"""

from __future__ import annotations

import logging
import secrets
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from worker.clock import SystemClock
from worker.deps import build_driver, build_ledger, job_dir
from worker.errors import JobNotFound, SpecError
from worker.records.lease import Heartbeat
from worker.records.ledger import Ledger
from worker.session.jobfiles import JobFiles
from worker.session.runner import RunnerDeps, run_job
from worker.session.watchdog import start_watchdog
from worker.settings import Settings, load_settings
from worker.spec import decode_spec
from worker.states import TERMINAL, JobState
from worker.store.artifacts import build_store
from worker.store.hub import HubStore

log = logging.getLogger(__name__)


StateListener = Callable[[JobState, str], None]


def execute_job(
    payload: str,
    settings: Settings,
    ledger: Ledger,
    worker_name: str,
    on_state: StateListener | None = None,
) -> dict[str, Any]:
    try:
        spec = decode_spec(payload)
    except SpecError as exc:
        # Validated again on receipt: a bad message never reaches the runner.
        log.error("refused a job spec: %s", exc)
        return {"state": "refused", "reason": str(exc)}
    try:
        rec = ledger.get(spec.job_id)
    except JobNotFound:
        return {"state": "refused", "reason": "no ledger record for this job"}
    if rec.state in TERMINAL:
        return {"state": rec.state.value, "reason": "already terminal"}
    owner = secrets.token_hex(16)
    if not ledger.claim(spec.job_id, owner, settings.lease_ttl_s):
        # Redelivery or a duplicate message: another runner owns this job (invariant 6).
        return {"state": "skipped", "reason": "job is owned by another runner"}
    files = JobFiles(job_dir(settings, spec.job_id)).ensure()
    clock = SystemClock()
    token = read_token(settings.hf_token_file)
    hub = HubStore(settings.hf_endpoint, token)
    deps = RunnerDeps(
        clock=clock,
        ledger=ledger,
        driver=build_driver(settings, spec.job_id),
        store=build_store(spec.artifact, endpoint=settings.hf_endpoint, token=token),
        check_input=hub.exists_nonempty,
        settings=settings,
        files=files,
        start_watchdog=lambda f, env: start_watchdog(f, env, clock=clock),
        worker_name=worker_name,
        on_state=on_state or (lambda state, reason: None),
    )
    try:
        with Heartbeat(
            ledger,
            spec.job_id,
            owner,
            interval_s=settings.heartbeat_interval_s,
            ttl_s=settings.lease_ttl_s,
        ):
            outcome = run_job(spec, owner, deps)
    finally:
        ledger.release_lock(spec.job_id, owner)
    return {"state": outcome.state.value, "reason": outcome.reason, "exit_code": outcome.exit_code}


def read_token(path: Path | None) -> str | None:
    """The Hub token, in this worker's memory only (checked again before allocation)."""
    if path is None:
        return None
    try:
        return path.read_text().strip() or None
    except OSError:
        return None  # the runner's pre-allocation check reports the file's problem


def run_job_task(self: Any, payload: str) -> dict[str, Any]:
    settings = load_settings()
    hostname = getattr(self.request, "hostname", None) or socket.gethostname()

    def to_flower(state: JobState, reason: str) -> None:
        # Flower ignores update_state, but a custom task event `task-<name>` becomes the task's
        # state there (celery.events.state: unknown event types are upper-cased into states).
        self.send_event(f"task-{state.value}", job_state=state.value, reason=reason[:300])

    return execute_job(payload, settings, build_ledger(settings), hostname, to_flower)


def janitor_task() -> list[str]:
    from worker.janitor import janitor_pass

    settings = load_settings()
    report = janitor_pass(build_ledger(settings), dry_run=False)
    for line in report.lines():
        log.info(line)
    return report.lines()
