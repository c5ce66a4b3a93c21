"""What the gate does for each request (`wire.Body`), as the user who sent it: the checks that
need the ledger (ids, owners, dependencies, destinations) and the shared writes.

Owns the operations; reading the streams and answering is `serve.py`'s, the wire `wire.py`'s.
Every operation is idempotent (a request handled twice, after a gate died, changes nothing
more): a submit and a retry by their idempotency keys (`worker.records.create`), a cancel of a
job already over is `already_over`, a note is one more event. A refusal is one line, raised
before anything is written.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from worker.errors import ColabqError, JobNotFound, UserInputError
from worker.fleet.messages import build_copies, publish_sent
from worker.flow import deps as flow_deps
from worker.flow.sweeps import SweepTag, new_sweep_id, no_sweep, points_of
from worker.gate import wire
from worker.people.destinations import check_destination
from worker.people.identity import NO_ACL_USER, Identity
from worker.people.owners import after_refusal, new_job_id, owner_of, refusal
from worker.records.create import RESUBMITTABLE
from worker.records.events import note_action
from worker.states import TERMINAL, JobState

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from celery import Celery

    from worker.records.ledger import Ledger
    from worker.settings import Settings
    from worker.spec import JobSpec


@dataclass(frozen=True)
class Requester:
    """Who sent a request: `user` from the stream's key; `host` and `local_user` the client's
    word (labels); `operator` what Redis lets `user` write (`serve.Gate.is_operator`)."""

    user: str
    host: str
    local_user: str
    operator: bool

    @property
    def identity(self) -> Identity:
        return Identity(self.user, self.host, self.local_user)


@dataclass(frozen=True)
class GateContext:
    """The gate's side effects: its (service) ledger, its Celery app, the deployment's settings."""

    ledger: Ledger
    app: Celery
    settings: Settings


def handle(ctx: GateContext, who: Requester, body: wire.Body) -> wire.Result:
    """Carry out `body` for `who`; a known error is the reply (`wire.Refused`), never raised."""
    ledger = ctx.ledger.acting_as(who.identity)
    try:
        if isinstance(body, wire.Submit):
            return submit(ctx, ledger, who, body)
        if isinstance(body, wire.Retry):
            return retry(ctx, ledger, who, body.job)
        if isinstance(body, wire.Cancel):
            return wire.Cancelled(jobs=cancel(ledger, who, body.jobs, body.reason))
        if isinstance(body, wire.CancelSweep):
            return wire.Cancelled(jobs=cancel_sweep(ledger, who, body.sweep, body.reason))
        check_may_change(ledger, who, body.jobs, body.kind)
        for job_id in dict.fromkeys(body.jobs):
            note_action(ledger, job_id, body.kind, body.reason, ledger.state_of(job_id).value)
        return wire.Noted(count=len(set(body.jobs)))
    except ColabqError as exc:
        return wire.refusal(exc)


# --- who may change what ----------------------------------------------------------------------


def check_may_change(ledger: Ledger, who: Requester, job_ids: Sequence[str], verb: str) -> None:
    """Every job exists (JobNotFound otherwise) and is `who`'s, unless an operator (one line
    naming the first job of someone else). Nothing is written."""
    ids = list(dict.fromkeys(job_ids))
    pipe = ledger.r.pipeline(transaction=False)
    for job_id in ids:
        pipe.exists(ledger.keys.job(job_id))
    for job_id, found in zip(ids, pipe.execute(), strict=True):
        if not found:
            raise JobNotFound(job_id)
    others = [j for j in ids if not _mine(who, j)]
    if others and not who.operator:
        raise UserInputError(refusal(who.identity, others[0], verb))


def _mine(who: Requester, job_id: str) -> bool:
    return who.user == NO_ACL_USER or owner_of(job_id) == who.user


# --- submit and retry ---------------------------------------------------------------------------


def submit(ctx: GateContext, ledger: Ledger, who: Requester, body: wire.Submit) -> wire.Submitted:
    """Record the jobs (ids given here, in `who`'s namespace) in one atomic step, then send the
    new ones' messages in one pipelined send."""
    me = who.identity
    specs = [_as_new(s, me.owner, me.owner) for s in body.specs]
    for spec in specs:
        check_destination(who.user, spec, ctx.settings)
    after = _dependencies(ledger, who, body.after)
    sweep = None
    if body.sweep or (len(specs) > 1 and not any(after)):
        sweep = SweepTag(new_sweep_id(me.owner), body.max_parallel)
    jobs = _create(ctx, ledger, specs, exclusive=not body.allow_same_run, sweep=sweep, after=after)
    return wire.Submitted(jobs=tuple(jobs), sweep=sweep.sweep_id if sweep else "")


def retry(ctx: GateContext, ledger: Ledger, who: Requester, job_id: str) -> wire.Retried:
    """The old job's exact spec as a new job of the old job's owner, linked to it (its
    idempotency key names the old job until this one takes it: `worker.records.create`)."""
    check_may_change(ledger, who, [job_id], "retry")
    old = ledger.get(job_id)
    if old.state is JobState.SUCCEEDED:
        raise UserInputError(
            f"Job {job_id} SUCCEEDED: nothing to retry. To run it again, submit it with a new "
            "--idempotency-key."
        )
    if old.state not in RESUBMITTABLE:
        raise UserInputError(
            f"Job {job_id} is {old.state.name}, not over: follow it (`colabq logs -f {job_id}`), "
            f"or cancel it first (`colabq cancel {job_id}`)."
        )
    owner = owner_of(job_id)
    spec = _as_new(old.spec, owner, owner or who.identity.submitter)
    spec = spec.model_copy(update={"submitted_at": datetime.now(UTC), "submitted_from": who.host})
    check_destination(who.user, spec, ctx.settings)
    [outcome] = _create(ctx, ledger, [spec], exclusive=True)
    if outcome.created:
        note_action(ledger, job_id, "retry", f"submitted again as job {outcome.job_id}")
    return wire.Retried(job=outcome, old_state=old.state)


def _as_new(spec: JobSpec, owner: str | None, submitter: str | None) -> JobSpec:
    """`spec` with a new id in `owner`'s namespace (a client never picks an id) and, if given,
    its submitter: under ACLs the Redis user, which a worker checks against the id's owner;
    without, the client's word (user@host) stands, as the deployment trusts everyone."""
    update = {"job_id": new_job_id(owner)} | ({"submitted_by": submitter} if submitter else {})
    return spec.model_copy(update=update)


def _dependencies(ledger: Ledger, who: Requester, after: Sequence[Sequence[wire.Dep]]) -> list[str]:
    """Each spec's dependencies as the creation script takes them: every job named exists and
    is `who`'s own (an operator's: anyone's)."""
    named = list(dict.fromkeys(d.job for deps in after for d in deps if not d.job.startswith("@")))
    pipe = ledger.r.pipeline(transaction=False)
    for job_id in named:
        pipe.exists(ledger.keys.job(job_id))
    for job_id, found in zip(named, pipe.execute(), strict=True):
        if not found:
            raise UserInputError(
                f"--after {job_id}: no such job: name it by its id, as `colabq status` lists it."
            )
        if not _mine(who, job_id) and not who.operator:
            raise UserInputError(after_refusal(job_id))
    return [flow_deps.encode([flow_deps.Dep(d.job, d.cond) for d in deps]) for deps in after]


def _create(
    ctx: GateContext,
    ledger: Ledger,
    specs: Sequence[JobSpec],
    *,
    exclusive: bool,
    sweep: SweepTag | None = None,
    after: Sequence[str] = (),
) -> list[wire.JobOutcome]:
    """Record the jobs and push the new ones' messages in one atomic step (all or none), then
    publish their `task-sent` events; a job submitted before is answered with its state."""
    copies = build_copies(ctx.app, specs, ctx.settings.queue_prefix)
    messages = [[(c.queue, c.message) for c in job] for job in copies]
    created = ledger.create_many(
        specs, exclusive=exclusive, sweep=sweep, after=after, messages=messages
    )
    sent = [c for job, (_, new) in zip(copies, created, strict=True) if new for c in job]
    try:
        publish_sent(ctx.app, sent)
    except Exception:  # the jobs are queued; Flower misses their PENDING rows only
        log.warning("gate: the task-sent events of %d message(s) were not published", len(sent))
    outcomes = []
    for job_id, is_new in created:
        state = JobState.QUEUED if is_new else ledger.state_of(job_id)
        outcomes.append(wire.JobOutcome(job_id=job_id, created=is_new, state=state))
    return outcomes


# --- cancel ---------------------------------------------------------------------------------------


def cancel(
    ledger: Ledger, who: Requester, job_ids: Sequence[str], reason: str
) -> tuple[wire.CancelOutcome, ...]:
    check_may_change(ledger, who, job_ids, "cancel")
    return tuple(cancel_one(ledger, job_id, reason) for job_id in dict.fromkeys(job_ids))


def cancel_sweep(
    ledger: Ledger, who: Requester, sweep_id: str, reason: str
) -> tuple[wire.CancelOutcome, ...]:
    """Every point of the sweep that is not over; another user's sweep refused in one line."""
    owner = owner_of(sweep_id)
    if who.user != NO_ACL_USER and owner != who.user and not who.operator:
        raise UserInputError(
            f"Sweep {sweep_id} belongs to {owner or 'no ACL user'}, not to you ({who.user}): "
            "only its owner or an operator may cancel it (an operator's Redis user is made "
            "with `colabq acl NAME --operator`)."
        )
    ids = points_of(ledger.r, ledger.keys, sweep_id)
    if not ids:
        raise UserInputError(no_sweep(sweep_id))
    live = {i.decode() for i in ledger.r.smembers(ledger.keys.active())}
    return cancel(ledger, who, [i for i in ids if i in live], reason) if live & set(ids) else ()


def cancel_one(ledger: Ledger, job_id: str, reason: str) -> wire.CancelOutcome:
    """A job no live runner holds and that holds no session ends CANCELLED now; otherwise its
    cancel flag asks its runner (or the adopter of a dead one) to stop it."""
    before = ledger.state_of(job_id)
    if before in TERMINAL:
        result: Literal["cancelled", "requested", "already_over"] = "already_over"
    elif ledger.cancel(job_id, reason):
        result = "cancelled"
    else:
        result = "requested"
    return wire.CancelOutcome(job_id=job_id, state_before=before, result=result)
