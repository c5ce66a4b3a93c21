"""Thin Celery tasks: decode the spec, take the job's lock, call the runner, settle; each task
registered, under its name in `worker.tasknames`, by this module itself.

All logic lives in plain functions (`execute_job`) that take their side effects as arguments.
"""

from __future__ import annotations

import functools
import json
import logging
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celery import shared_task
from celery.exceptions import Ignore, Retry
from celery.signals import worker_process_init

from worker.deps import build_ledger, job_dir
from worker.errors import ColabqError, JobNotFound, SpecError, StaleOwner
from worker.fleet.causes import Cause
from worker.fleet.hooks import FleetHooks, build_fleet_hooks
from worker.fleet.putback import Attempt, give_back_host
from worker.people.owners import owner_of
from worker.records import ids
from worker.records.claim import Claim, claim_and_start
from worker.records.ledger import Ledger
from worker.records.record import DamagedRecord
from worker.records.vms import NotTheJobsVm
from worker.session.job import Claimed
from worker.session.jobfiles import JobFiles
from worker.session.owner import adopt_job, host_id, own_job
from worker.settings import Settings, load_settings
from worker.spec import JobSpec, decode_spec
from worker.states import TERMINAL, JobState
from worker.tasknames import ADOPT, JANITOR, RUN_JOB

log = logging.getLogger(__name__)


StateListener = Callable[[JobState, str], None]


def execute_job(
    payload: str,
    settings: Settings,
    ledger: Ledger,
    worker_name: str,
    on_state: StateListener | None = None,
    beat_ledger: Ledger | None = None,
    fleet: FleetHooks | None = None,
) -> dict[str, Any]:
    """Run one job message on this worker: refuse a bad spec, skip a job that is over, owned,
    waiting for a GPU or meant for a healthy worker, claim it once this host's own setup
    succeeded, and own it. A job given back for a host failure is sent again and this worker
    drains; one given back for capacity is sent again by its next try (`fleet.prober`)."""
    try:
        spec = decode_spec(payload)
    except SpecError as exc:
        # Validated again on receipt: a bad message never reaches the runner. A job that an
        # older colabq recorded (a spec this version refuses) ends FAILED, not QUEUED forever.
        log.error("refused a job spec: %s", exc)
        _fail_refused(payload, ledger, f"refused by the worker: {exc}")
        return {"state": "refused", "reason": str(exc)}
    job_owner = owner_of(spec.job_id)
    if job_owner is not None and spec.submitted_by != job_owner:
        # Only the owner writes its namespace's records: a spec naming someone else as its
        # submitter was not written by them (per-user settings trust `submitted_by`).
        log.error("refused job %s: submitted_by is not its owner", spec.job_id)
        return {"state": "refused", "reason": "the spec's submitter is not the job's owner"}
    fleet = fleet or FleetHooks()
    try:
        # This host's own setup, before the claim: a job is owned only once it succeeded.
        JobFiles(job_dir(settings, spec.job_id)).ensure()
    except OSError as exc:
        return _setup_failed(spec, settings, ledger, worker_name, fleet, exc)
    owner = secrets.token_hex(16)
    claimed = Claimed(nonce=secrets.token_hex(8), deadline_at=time.time() + spec.wall_cap_s)
    got = claim_and_start(
        ledger, spec.job_id, owner, ttl_s=settings.lease_ttl_s, worker=worker_name,
        owner_host=host_id(settings), nonce=claimed.nonce, wall_deadline_at=claimed.deadline_at,
        payload=payload, account=settings.account or "",
    )  # fmt: skip
    if got.claim is Claim.MISSING:
        return {"state": "refused", "reason": "no ledger record for this job"}
    if got.claim is Claim.FORGED:
        log.error("refused a message for job %s: its spec is not the job's", spec.job_id)
        return {"state": "refused", "reason": "the message's spec is not the job's record"}
    if got.state in TERMINAL:
        return {"state": got.detail, "reason": "already terminal"}
    if got.claim is Claim.WAITING:
        # A job waiting for a GPU, its sweep's cap or a quota: its next try sends it again.
        return {
            "state": "skipped",
            "reason": "the job waits for a GPU, its sweep or a quota; its next try is later",
        }
    if got.claim is Claim.DRAINED:
        # Taken in the moment between a drain and its cancelled consumer: straight back.
        fleet.resend(spec)
        fleet.drain(None)
        return {"state": JobState.QUEUED.value, "put_back": "drained",
                "reason": "this worker is drained: the job was sent back"}  # fmt: skip
    if got.claim is not Claim.CLAIMED:
        # Redelivery or a duplicate message: another runner owns this job (invariant 6).
        return {"state": "skipped", "reason": "job is owned by another runner"}
    outcome = own_job(
        spec, owner, settings, ledger, worker_name=worker_name, adopted=False,
        on_state=on_state, beat_ledger=beat_ledger, claimed=claimed,
    )  # fmt: skip
    if outcome.put_back == Cause.HOST.value:
        if outcome.state is JobState.QUEUED:
            fleet.resend(spec)
        fleet.drain(outcome.reason)
    result: dict[str, Any] = {
        "state": outcome.state.value, "reason": outcome.reason, "exit_code": outcome.exit_code,
    }  # fmt: skip
    if outcome.put_back:
        result["put_back"] = outcome.put_back
    return result


def _setup_failed(
    spec: JobSpec,
    settings: Settings,
    ledger: Ledger,
    worker_name: str,
    fleet: FleetHooks,
    exc: OSError,
) -> dict[str, Any]:
    """This host cannot even set the job up: it goes back to the queue, never owned, and the
    worker drains."""
    why = f"state dir {settings.state_dir} is unusable: {exc}"
    attempt = Attempt(time.time(), worker_name, Cause.HOST, why)
    try:
        state, reason = give_back_host(ledger, spec.job_id, "", attempt, settings.poison_hosts)
    except (StaleOwner, JobNotFound):  # claimed, ended or gone meanwhile: nothing to give back
        fleet.drain(why)
        return {"state": "skipped", "reason": "job is over or owned by another runner"}
    if state is JobState.QUEUED:
        fleet.resend(spec)
    fleet.drain(why)
    return {"state": state.value, "reason": reason, "put_back": Cause.HOST.value}


def _fail_refused(payload: str, ledger: Ledger, reason: str) -> None:
    """FAILED with `reason`, if the payload names a job the ledger holds as QUEUED."""
    try:
        job_id = ids.job_id(json.loads(payload).get("job_id"))
    except (ValueError, AttributeError):
        return
    if job_id is None:  # not a job id: never a key to write
        return
    try:
        ledger.transition(job_id, JobState.FAILED, owner="", reason=reason[:1000])
    except ColabqError as exc:  # no such job, or not queued (another runner has it)
        log.info("refused spec of job %s left as it is: %s", job_id, exc)


class JobDidNotSucceed(Exception):
    """Raised by a task whose job ended in any state but SUCCEEDED, so that Celery (and Flower)
    record the task as FAILURE with the job's state and reason. Registered in `throws`: logged
    as one line, never with a traceback."""


class JobGivenBack(Exception):
    """What a task given back to the queue says (its RETRY in Flower): why, by which worker."""


# Celery's own task event names; a custom event must never reuse one (Flower would take a
# failed job's `task-failed` for Celery's, or a cancelled job's end for a revoke).
_CELERY_EVENTS = frozenset(
    {"sent", "received", "started", "succeeded", "failed", "retried", "revoked", "rejected"}
)


class _Flower:
    """What Flower shows of a job: its phases, and its progress while it runs."""

    def __init__(self, task: Any) -> None:
        self.task = task

    def __call__(self, state: JobState, reason: str) -> None:
        # Flower ignores update_state, but a custom task event `task-<name>` becomes the task's
        # state there (celery.events.state upper-cases unknown event types into states). Only
        # the phases on the way are sent: the end is Celery's own SUCCESS or FAILURE.
        if state in TERMINAL or state.value in _CELERY_EVENTS:
            return
        self.task.send_event(f"task-{state.value}", job_state=state.value, reason=reason[:300])

    def progress(self, text: str) -> None:
        """The run's progress (`worker.progress.words.flower_text`) as the task's `result`,
        the field Flower's job page shows (Celery's own result replaces it at the end)."""
        running = JobState.RUNNING.value
        self.task.send_event(f"task-{running}", job_state=running, result=text[:300])


def _flower(task: Any) -> StateListener:
    return _Flower(task)


def _ended(result: dict[str, Any]) -> dict[str, Any]:
    """The task's end as Celery (and Flower, which keys a row by the task id: the job id) must
    see it: SUCCESS, FAILURE with the job's state and reason, RETRY for a job given back to
    the queue (its next attempt has the same task id and moves the row on), and no change at
    all for a message that was not this job's attempt (a duplicate, a stale copy)."""
    state = str(result.get("state"))
    if state == JobState.SUCCEEDED.value:
        return result
    if state == "skipped" or result.get("reason") == "already terminal":
        raise Ignore()
    if state == JobState.QUEUED.value:
        reason = str(result.get("reason", "given back to the queue"))[:1000]
        raise Retry(reason, exc=JobGivenBack(reason))
    code = result.get("exit_code")
    exit_part = f" (exit code {code})" if code is not None else ""
    raise JobDidNotSucceed(f"{state.upper()}{exit_part}: {result.get('reason', '')}"[:1000])


@dataclass(frozen=True)
class WorkerContext:
    """What every task of a worker process shares, built at its first task: the settings
    (read once: a change takes a worker restart), the ledger's Redis client and the lease's
    own client (short retries). No settings parse, no new connection per job."""

    settings: Settings
    ledger: Ledger
    beat_ledger: Ledger


@functools.cache
def worker_context() -> WorkerContext:
    settings = load_settings()
    return WorkerContext(settings, build_ledger(settings), build_ledger(settings, retry_s=1.0))


@worker_process_init.connect  # type: ignore[untyped-decorator]
def _fresh_context(**_: Any) -> None:
    """A forked pool process builds its own (a parent's clients are not shared across fork),
    before its first job, with the Hub client every job's store uses: the first job does not
    wait for them."""
    worker_context.cache_clear()
    try:
        worker_context()
        import worker.store.hub  # noqa: F401
    except Exception as exc:  # the task reports a bad setting, in one line, when it runs
        log.warning("worker context not built ahead: %s", exc)


def run_job_task(self: Any, payload: str) -> dict[str, Any]:
    ctx = worker_context()
    hostname = getattr(self.request, "hostname", None) or socket.gethostname()
    fleet = build_fleet_hooks(self.app, ctx.settings, ctx.ledger, hostname)
    return _ended(
        execute_job(
            payload,
            ctx.settings,
            ctx.ledger,
            hostname,
            _flower(self),
            beat_ledger=ctx.beat_ledger,
            fleet=fleet,
        )
    )


def adopt_task(self: Any, job_id: str) -> dict[str, Any]:
    """A restarted worker takes back a job it owned before it died, and finishes it."""
    from worker.accounts.login import AccountMismatch

    if ids.job_id(job_id) is None:  # a message anyone may push: never a path or a key
        ids.report("job id", f"the arguments of task {ADOPT}", job_id)
        return {"state": "refused", "reason": "not a job id"}
    ctx = worker_context()
    hostname = getattr(self.request, "hostname", None) or socket.gethostname()
    try:
        outcome = adopt_job(
            job_id, ctx.settings, ctx.ledger,
            worker_name=hostname, on_state=_flower(self), beat_ledger=ctx.beat_ledger,
        )  # fmt: skip
    # Its VM is on another account (that account's hosts' job), or its record names a VM not
    # its own or cannot be read: nothing is done with it.
    except (AccountMismatch, NotTheJobsVm, DamagedRecord) as exc:
        log.warning("not adopting %s: %s", job_id, exc.advice())
        return {"state": "skipped", "reason": exc.advice()}
    if outcome is None:
        return {"state": "skipped", "reason": "over, or owned by a live owner"}
    return _ended(
        {"state": outcome.state.value, "reason": outcome.reason, "exit_code": outcome.exit_code}
    )


def janitor_task(self: Any) -> list[str]:
    from worker.janitor.run import janitor_pass
    from worker.janitor.wiring import build_janitor_deps

    ctx = worker_context()
    deps = build_janitor_deps(ctx.settings, ctx.ledger, send_with=lambda: self.app)
    report = janitor_pass(deps, dry_run=False)
    lines: list[str] = report.lines()
    for line in lines:
        log.info(line)
    return lines


# Each task registers itself with the app that imports this module (a worker, through
# `worker.celery_app.WORKER_MODULES`): the app's module names this one and never imports it. A
# job that did not succeed fails its task (FAILURE in Flower, with the reason): an expected
# outcome, logged in one line without a traceback.
_ENDED = (JobDidNotSucceed,)
shared_task(name=RUN_JOB, bind=True, throws=_ENDED)(run_job_task)
shared_task(name=ADOPT, bind=True, throws=_ENDED)(adopt_task)
shared_task(name=JANITOR, bind=True)(janitor_task)
