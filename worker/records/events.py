"""The event log: one Redis stream, `<prefix>:events`, of every state change and every action
(submit, cancel request, drain, undrain, adopt, janitor stop, retry, clean, a run's projected
overrun of its time limit), with when, who, from which host and why (`colabq events`, the
notifier in `worker.notify`).

An entry's fields: `job` (a job id, or a worker's name for a drain), `kind` (`state` for a state
change, else the action), `from` (the state it left, `state` only) and `e`, the JSON of a history
entry (`record.history_entry`: state, at, reason, actor, host[, action]). A state change's event
is appended in the very script or transaction that writes its history entry (the create, claim
and put-back scripts, `Ledger.transition`, a record's restore), so no change is ever without its
event.

Retention: a Python append trims the stream by MINID to now minus the ledger's retention (the
job records' own); the scripts' appends do not (every job's terminal transition trims).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from worker.records import ids
from worker.records.keys import Keys
from worker.states import JobState

if TYPE_CHECKING:
    from worker.records.ledger import Ledger

STATE = "state"
ACTIONS = ("submit", "cancel", "drain", "undrain", "adopt", "janitor-stop", "retry", "clean",
           "notify-failed", "overrun")  # fmt: skip
OVERRUN = "overrun"  # `worker.progress.guard`: the run's rate projects its end past its limit


def events_key(keys: Keys) -> str:
    """Stream of the deployment's events (this module's docstring)."""
    return f"{keys.prefix}:events"


def minid(retention_s: float) -> str:
    """The oldest stream id kept: entries older than the retention go. Stream ids are Redis's
    own clock: compared with the wall clock, never a job's (a test's) clock."""
    return str(max(int((time.time() - retention_s) * 1000), 0))


def fields(job: str, kind: str, src: str, entry: str) -> dict[str, str]:
    return {"job": job, "kind": kind, "from": src, "e": entry}


def append(
    pipe: Any, keys: Keys, retention_s: float, job: str, kind: str, src: str, entry: str
) -> None:
    """Queue one event on `pipe` (a pipeline or a client): one XADD, trimming by MINID (exact:
    it drops the old head entries alone, nothing when there are none)."""
    pipe.xadd(
        events_key(keys), fields(job, kind, src, entry), minid=minid(retention_s),
        approximate=False,
    )  # fmt: skip


@dataclass(frozen=True)
class Event:
    id: str
    at: float
    job: str
    kind: str
    src: str  # the state left (`state` events)
    dst: str  # the state entered (`state`), or the job's state when the action was taken
    actor: str
    host: str
    reason: str

    def to_json(self) -> dict[str, object]:
        d = asdict(self)
        d["from"], d["to"] = d.pop("src"), d.pop("dst")
        return d


# An entry larger than this (all its fields) is not one colabq wrote: skipped, never parsed.
MAX_ENTRY_BYTES = 64 * 1024
_KIND = re.compile(r"[a-z][a-z-]{0,31}")
_STATES = frozenset(s.value for s in JobState)


def decode(entry_id: bytes | str, raw: Mapping[bytes, bytes]) -> Event:
    """One entry as an Event; ValueError (one line: why) for an entry colabq did not write: a
    field not UTF-8, no or a bad `job` (a job id, or a worker's name for a drain), `kind` or
    state, an `e` that is not a JSON object, a time that is not a finite number, or over
    `MAX_ENTRY_BYTES`. Extra fields are ignored."""
    eid = ids.text(entry_id) or ""
    if sum(len(k) + len(v) for k, v in raw.items()) > MAX_ENTRY_BYTES:
        raise ValueError(f"over {MAX_ENTRY_BYTES} bytes")
    f: dict[str, str] = {}
    for k, v in raw.items():
        key, value = ids.text(k), ids.text(v)
        if key is None or value is None:
            raise ValueError("a field is not UTF-8 text")
        f[key] = value
    job, kind, src = f.get("job", ""), f.get("kind", ""), f.get("from", "")
    if ids.job_id(job) is None and ids.worker(job) is None:
        raise ValueError(f"job {ids.shown(job)} is neither a job id nor a worker's name")
    if not _KIND.fullmatch(kind) or (src and src not in _STATES):
        raise ValueError(f"kind {ids.shown(kind)} or from {ids.shown(src)} unknown")
    e = json.loads(f.get("e", "{}"))
    if not isinstance(e, dict):
        raise ValueError("e is not a JSON object")
    at = float(e["at"]) if e.get("at") is not None else int(eid.split("-")[0]) / 1000
    dst = str(e.get("state", ""))
    if not math.isfinite(at) or (dst and dst not in _STATES) or (kind == STATE and not dst):
        raise ValueError(f"at {ids.shown(at)} or state {ids.shown(dst)} unreadable")
    return Event(
        id=eid, at=at, job=job, kind=kind, src=src, dst=dst, actor=str(e.get("actor", "")),
        host=str(e.get("host", "")), reason=str(e.get("reason", "")),
    )  # fmt: skip


def _decoded(keys: Keys, rows: Any) -> list[Event]:
    """The entries of `rows` that decode; each that does not is reported and skipped."""
    out = []
    for i, raw in rows:
        try:
            out.append(decode(i, raw))
        except (ValueError, TypeError, KeyError) as exc:  # JSONDecodeError is a ValueError
            ids.report("colabq event", f"{events_key(keys)} entry {ids.shown(i)}", str(exc))
    return out


def read(
    client: Any, keys: Keys, *, since: float = 0.0, job: str | None = None, count: int = 1000
) -> list[Event]:
    """The events since `since` (epoch s), oldest first, those of `job` alone if given: read
    in pages of `count` (the whole log can be long; a job's events are filtered here). An
    entry that does not decode is reported and skipped."""
    out: list[Event] = []
    start = str(int(since * 1000))
    while True:
        rows = client.xrange(events_key(keys), min=start, count=count)
        out += [ev for ev in _decoded(keys, rows) if job is None or ev.job == job]
        if len(rows) < count:
            return out
        last = rows[-1][0]
        start = "(" + (last.decode() if isinstance(last, bytes) else last)


def last_id(client: Any, keys: Keys) -> str:
    """The newest entry's id ('0-0' for none): where a follower starts."""
    rows = client.xrevrange(events_key(keys), count=1)
    if not rows:
        return "0-0"
    i = rows[0][0]
    return i.decode() if isinstance(i, bytes) else str(i)


class Batch(NamedTuple):
    """What a wait got: the events that decode, the id to wait after next (the last entry
    read, a skipped one included), and how many entries were skipped."""

    events: list[Event]
    after: str
    skipped: int


def wait(client: Any, keys: Keys, after: str, *, block_ms: int) -> Batch:
    """The events after id `after`, blocking up to `block_ms` for the first (XREAD BLOCK)."""
    res = client.xread({events_key(keys): after}, count=1000, block=block_ms)
    rows = res[0][1] if res else []
    last = ids.text(rows[-1][0]) if rows else None
    got = _decoded(keys, rows)
    return Batch(got, last or after, len(rows) - len(got))


def note_action(ledger: Ledger, job: str, kind: str, reason: str, state: str = "") -> None:
    """Append an action's event (a drain, an adopt, a janitor stop, a retry, a clean), as this
    process's identity; `state`: the job's state then, if known."""
    now = ledger.clock.time()
    me = ledger.identity
    entry: dict[str, object] = {"at": now, "reason": reason, "actor": me.actor, "host": me.host,
                                "action": kind}  # fmt: skip
    if state:
        entry["state"] = state
    append(ledger.r, ledger.keys, ledger.retention_s, job, kind, "", json.dumps(entry))
