"""A job's record as the ledger reads it: the fields a runner may set, the record, its history
entries and log lines, and their encoding in Redis. Pure: no Redis call here (`ledger.py` reads
and writes them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from worker.errors import LedgerError
from worker.records import ids
from worker.spec import JobSpec, decode_spec
from worker.states import HOLDS_SESSION, JobState

# Record fields a runner may set besides the state (anything else is a bug, caught here).
RUNTIME_FIELDS = frozenset(
    {
        "session",
        "endpoint",
        "exit_code",
        "report",
        "artifact_location",
        "results_local",
        "worker",
        "outcome",
        "phase",
        # The wall cap's deadline (epoch s), fixed when the job is first claimed: every later
        # owner (a restarted worker, an adopter on another host) enforces the same one.
        "wall_deadline_at",
        # What the job ends as once its session is verified gone (written when RELEASING
        # begins, so an owner that dies mid-release leaves its successor the outcome).
        "pending_outcome",
        "pending_reason",
        # For a pending QUEUED (the session released, then the job given back): its cause.
        "pending_cause",
        # Restarts after a lost VM: the current segment (0 first) and the restarts so far.
        "segment",
        "restarts",
        # Where the current owner runs (for people and for a restarted worker's adoption).
        "owner_host",
        # The job's sentinel nonce (not a secret: it tells colabq's lines from the job's own),
        # so that any later owner can read the wrapper's console.
        "nonce",
        # A janitor sent a QUEUED job's message again (once) at this time.
        "resent_at",
        # The tracker run colabq opened for the job ("mlflow:<run id>", "wandb:<e>/<p>/<id>")
        # and, for MLflow, its experiment id: the janitor finishes it if the job dies with it
        # still running. Ids only, never a credential.
        "tracker_run",
        "tracker_experiment",
        # The GPU type the job runs on (set at create to its first choice; a fallback type when
        # Colab could not serve the first one): what `status` shows and its rate.
        "gpu",
        # The Colab account of the worker that claimed it (`worker.accounts`): only a host of
        # that account acts on the job's VM.
        "account",
        # The `colab` CLI version its allocation was checked against (`worker.colab.versions`),
        # for the final report.
        "colab_cli",
    }
)

# States in which a recorded endpoint starts the held-time clock (`held_since`): an assigned
# session may be billed from ALLOCATING on.
MAY_HOLD = frozenset({JobState.ALLOCATING, *HOLDS_SESSION})


class DamagedRecord(LedgerError, ValueError):
    """A job's record cannot be read as one: nothing is done with it."""

    def __init__(self, job_id: str, why: str) -> None:
        super().__init__(f"Job {job_id}'s record is damaged ({why}).")
        self.job_id, self.why = job_id, why

    hint = "`colabq status` lists it as DAMAGED; an operator may inspect it with redis-cli."


@dataclass(frozen=True)
class HistoryEntry:
    """A transition to `state`, or (with `action`) something done to a job in `state`; `actor`
    (the Redis ACL user, or the OS user without ACLs) did it on `host` ('' in entries written
    before they were recorded)."""

    state: JobState
    at: float
    reason: str
    actor: str = ""
    host: str = ""
    action: str = ""


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    spec: JobSpec
    state: JobState
    owner: str
    reason: str
    created_at: float
    updated_at: float
    fields: Mapping[str, str] = field(default_factory=dict)

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.fields.get(name, default)


@dataclass(frozen=True)
class LogLine:
    id: str
    text: str
    stream: str


def history_entry(
    state: JobState, at: float, reason: str, actor: str, host: str, action: str = ""
) -> str:
    entry: dict[str, object] = {"state": state.value, "at": at, "reason": reason,
                                "actor": actor, "host": host}  # fmt: skip
    if action:
        entry["action"] = action
    return json.dumps(entry)


def decode_history_entry(raw: bytes | str) -> HistoryEntry:
    """One entry; ValueError (UnicodeDecodeError, JSONDecodeError included), KeyError or
    TypeError when it does not parse."""
    d = json.loads(raw)
    return HistoryEntry(
        JobState(d["state"]), float(d["at"]), str(d["reason"]),
        str(d.get("actor", "")), str(d.get("host", "")), str(d.get("action", "")),
    )  # fmt: skip


def decode_history(job_id: str, raws: list[bytes]) -> list[HistoryEntry]:
    """The entries that parse, in order; each that does not is reported and skipped."""
    out = []
    for raw in raws:
        try:
            out.append(decode_history_entry(raw))
        except (ValueError, KeyError, TypeError):
            ids.report("history entry", f"the history of job {job_id}", raw)
    return out


def check_fields(values: Mapping[str, str]) -> None:
    unknown = set(values) - RUNTIME_FIELDS
    if unknown:
        raise ValueError(f"unknown job record fields: {sorted(unknown)}")


# Record fields that name something colabq may act on: checked as they are read (`ids`).
_NAMED = {"session": ids.session, "endpoint": ids.endpoint, "worker": ids.worker}


def decode_record(job_id: str, raw: Mapping[bytes, bytes]) -> JobRecord:
    """The record of `job_id`; DamagedRecord when it cannot be read as one (not UTF-8, no spec
    or not one, the spec of another job, no state). A session, endpoint or worker field outside
    its grammar is reported and left out (never acted on)."""
    try:
        d = {k.decode(): v.decode() for k, v in raw.items()}
        spec = decode_spec(d.pop("spec"))
        state = JobState(d.pop("state"))
        created_at, updated_at = float(d.pop("created_at", "0")), float(d.pop("updated_at", "0"))
    except (ValueError, KeyError) as exc:  # SpecError and UnicodeDecodeError are ValueErrors
        raise DamagedRecord(job_id, _why(exc)) from None
    if spec.job_id != job_id:
        raise DamagedRecord(job_id, f"its spec is job {spec.job_id}'s")
    for name, check in _NAMED.items():
        if name in d and check(d[name]) is None:
            ids.report(name, f"field {name} of job {job_id}", d.pop(name))
    return JobRecord(
        job_id=job_id, spec=spec, state=state, owner=d.pop("owner", ""),
        reason=d.pop("reason", ""), created_at=created_at, updated_at=updated_at, fields=d,
    )  # fmt: skip


def _why(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"no {exc.args[0]!s} field"
    return (str(exc).splitlines() or [type(exc).__name__])[0][:120]
