"""The gate's wire contract: a user's request (the one JSON field `r` of an entry of their
requests stream) and the gate's reply (the one element of the reply list), as pydantic models
(frozen, `extra="forbid"`), and colabq's known errors carried in a reply.

A request says what to do (`body.op`) and carries no identity the gate believes: the user is the
stream's key (`worker.gate.serve`). `host` and `local_user` are labels the client gives: a
history entry names the host, and without ACLs (user `default`) the submitter is
`local_user@host`, as a password-only deployment trusts everyone (README). Every id in a request
is checked against its grammar here, and against the ledger by the gate (`worker.gate.ops`).
"""

from __future__ import annotations

from typing import Annotated, Literal, NoReturn

from pydantic import BaseModel, ConfigDict, Field, model_validator

from worker.errors import (
    ColabqError,
    ConfigError,
    JobNotFound,
    LedgerError,
    RunNameInUse,
    SpecError,
    UserInputError,
)
from worker.flow.deps import Cond
from worker.records import ids
from worker.spec import JobSpec
from worker.states import JobState

MAX_BATCH = 10_000  # a sweep's most points (`producer.sweep.MAX_POINTS`)
MAX_REASON = 500
REQUEST_ID = r"^[0-9a-f]{32}$"
JOB_ID = rf"^{ids.JOB_ID.pattern}$"  # the one grammar (`worker.records.ids`)
SWEEP_ID = rf"^{ids.SWEEP_ID.pattern}$"
_HOST = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$"
_LOCAL_USER = r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$"

JobId = Annotated[str, Field(pattern=JOB_ID)]
SweepId = Annotated[str, Field(pattern=SWEEP_ID)]
# A reason recorded on jobs: one line, no control characters.
Reason = Annotated[str, Field(max_length=MAX_REASON, pattern=r"^[^\x00-\x1f\x7f]*$")]


class Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class Dep(Wire):
    """One dependency: a job id, or `@N` (the batch's N-th job: an earlier pipeline step)."""

    job: str = Field(pattern=r"^@\d{1,5}$|" + JOB_ID.removeprefix("^"))
    cond: Cond = "ok"


class Submit(Wire):
    """Jobs to record and send, in one atomic step: one job, a sweep's points (`sweep`, each
    given a sweep id by the gate, at most `max_parallel` running), or a pipeline's steps (each
    after its `after`). The gate gives every job its id; a spec's own is replaced."""

    op: Literal["submit"] = "submit"
    specs: tuple[JobSpec, ...] = Field(min_length=1, max_length=MAX_BATCH)
    after: tuple[tuple[Dep, ...], ...] = ()  # one per spec, or none at all
    sweep: bool = False
    max_parallel: int = Field(default=0, ge=0, le=MAX_BATCH)
    allow_same_run: bool = False

    @model_validator(mode="after")
    def _after(self) -> Submit:
        if self.after and len(self.after) != len(self.specs):
            raise ValueError("after: one list of dependencies per spec")
        for i, deps in enumerate(self.after):
            for d in deps:
                if d.job.startswith("@") and int(d.job[1:]) >= i:
                    raise ValueError(f"after: {d.job} is not an earlier job of the batch")
        return self


class Cancel(Wire):
    op: Literal["cancel"] = "cancel"
    jobs: tuple[JobId, ...] = Field(min_length=1, max_length=MAX_BATCH)
    reason: Reason = "cancelled by user"


class CancelSweep(Wire):
    """Every point of the sweep that is not over."""

    op: Literal["cancel_sweep"] = "cancel_sweep"
    sweep: SweepId
    reason: Reason = "cancelled by user"


class Retry(Wire):
    """A job that ended without succeeding, submitted again as a new job linked to it."""

    op: Literal["retry"] = "retry"
    job: JobId


class Note(Wire):
    """An action done outside Redis, recorded as an event of each job (`colabq clean`)."""

    op: Literal["note"] = "note"
    jobs: tuple[JobId, ...] = Field(min_length=1, max_length=MAX_BATCH)
    kind: Literal["clean"]
    reason: Reason


Body = Annotated[Submit | Cancel | CancelSweep | Retry | Note, Field(discriminator="op")]


class Request(Wire):
    rid: str = Field(pattern=REQUEST_ID)
    host: str = Field(pattern=_HOST)
    local_user: str = Field(pattern=_LOCAL_USER)
    body: Body


# --- replies --------------------------------------------------------------------------------


class JobOutcome(Wire):
    job_id: JobId
    created: bool  # False: its idempotency key named this job already
    state: JobState


class Submitted(Wire):
    kind: Literal["submitted"] = "submitted"
    jobs: tuple[JobOutcome, ...]
    sweep: Literal[""] | SweepId = ""


class CancelOutcome(Wire):
    job_id: JobId
    state_before: JobState
    result: Literal["cancelled", "requested", "already_over"]


class Cancelled(Wire):
    kind: Literal["cancelled"] = "cancelled"
    jobs: tuple[CancelOutcome, ...]


class Retried(Wire):
    kind: Literal["retried"] = "retried"
    job: JobOutcome
    old_state: JobState


class Noted(Wire):
    kind: Literal["noted"] = "noted"
    count: int = Field(ge=0)


ErrorKind = Literal[
    "run_name_in_use", "spec", "not_found", "config", "user_input", "ledger", "error"
]


class Refused(Wire):
    """A known error, to be raised again by the client as the same class with the same line."""

    kind: Literal["refused"] = "refused"
    error: ErrorKind
    message: str = Field(max_length=4000)
    fields: dict[str, str] = Field(default_factory=dict)


Result = Annotated[Submitted | Cancelled | Retried | Noted | Refused, Field(discriminator="kind")]


class Reply(Wire):
    rid: str = Field(pattern=REQUEST_ID)
    result: Result


def refusal(exc: ColabqError) -> Refused:
    """`exc` as a reply: its class by name, and what rebuilds it."""
    if isinstance(exc, RunNameInUse):
        f = {"run_name": exc.run_name, "job_id": exc.job_id, "state": exc.state,
             "where": exc.where}  # fmt: skip
        return Refused(error="run_name_in_use", message=str(exc), fields=f)
    if isinstance(exc, SpecError):
        f = {"field": exc.field, "message": exc.message}
        return Refused(error="spec", message=str(exc), fields=f)
    if type(exc) is JobNotFound:
        return Refused(error="not_found", message=str(exc), fields={"job_id": exc.job_id})
    for kind, cls in _PLAIN:
        if isinstance(exc, cls):
            return Refused(error=kind, message=exc.advice()[:4000])
    raise AssertionError("unreachable: every ColabqError is one of _PLAIN")


_PLAIN: tuple[tuple[ErrorKind, type[ColabqError]], ...] = (
    ("config", ConfigError), ("user_input", UserInputError), ("ledger", LedgerError),
    ("error", ColabqError),
)  # fmt: skip


def raise_refused(r: Refused) -> NoReturn:
    """Raise the error `r` carries, as the class the gate raised (its own line)."""
    f = r.fields
    try:
        if r.error == "run_name_in_use":
            raise RunNameInUse(f["run_name"], f["job_id"], f["state"], f["where"])
        if r.error == "spec":
            raise SpecError(f["field"], f["message"])
        if r.error == "not_found":
            raise JobNotFound(f["job_id"])
    except KeyError:
        pass  # a reply without its fields: its line, as an error of its family
    family: dict[str, ErrorKind] = {
        "run_name_in_use": "user_input", "spec": "user_input", "not_found": "ledger",
    }  # fmt: skip
    cls = dict(_PLAIN).get(family.get(r.error, r.error), ColabqError)
    raise cls(r.message)
