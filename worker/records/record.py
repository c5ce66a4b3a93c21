"""A job's record as the ledger reads it: the fields a runner may set, the record, its history
entries and log lines, and their encoding in Redis. Pure: no Redis call here (`ledger.py` reads
and writes them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

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
    d = json.loads(raw)
    return HistoryEntry(
        JobState(d["state"]), float(d["at"]), d["reason"],
        d.get("actor", ""), d.get("host", ""), d.get("action", ""),
    )  # fmt: skip


def check_fields(values: Mapping[str, str]) -> None:
    unknown = set(values) - RUNTIME_FIELDS
    if unknown:
        raise ValueError(f"unknown job record fields: {sorted(unknown)}")


def decode_record(job_id: str, raw: Mapping[bytes, bytes]) -> JobRecord:
    d = {k.decode(): v.decode() for k, v in raw.items()}
    return JobRecord(
        job_id=job_id,
        spec=decode_spec(d.pop("spec")),
        state=JobState(d.pop("state")),
        owner=d.pop("owner", ""),
        reason=d.pop("reason", ""),
        created_at=float(d.pop("created_at", "0")),
        updated_at=float(d.pop("updated_at", "0")),
        fields=d,
    )
