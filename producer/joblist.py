"""The job list `colabq status` shows, read fast: filters, pages, short ids, damaged records.

Only the summary fields a row shows are read (HMGET, every job in one non-transactional
pipeline, with its run's progress from its watch hash: `worker.progress.record`), never a spec:
the ids come newest first from the jobs index (ZREVRANGEBYSCORE for `--since`), and the filters
run on those fields here. An old record without summary fields has its spec's JSON read for
them (it alone). A record that cannot be read (bad JSON, an unknown state, a field missing or
not a number) becomes a DAMAGED row with what is known: one bad record never hides the others.
Rendering is `producer.render`'s; the command is `producer/commands/status.py`'s.
"""

from __future__ import annotations

import fnmatch
import getpass
import json
import os
import socket
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from worker.colab import rates
from worker.errors import UserInputError
from worker.progress import record as progress_record
from worker.progress.record import Limit, Reading
from worker.records import ids
from worker.records.keys import Keys
from worker.states import TERMINAL, JobState
from worker.utils import parse_duration_s

SUMMARY_FIELDS = (
    "state", "run_name", "gpu", "user", "worker", "created_at", "updated_at", "held_s",
    "held_since", "account",
)  # fmt: skip
DAMAGED = "damaged"
_STATE_VALUES = frozenset(s.value for s in JobState)
MIN_ID_CHARS = 6  # like git's short hashes: at least this many, more where needed to be unique

# `--state` groups, besides the state names themselves (any case) and `damaged`.
GROUPS: Mapping[str, frozenset[str]] = {
    "live": frozenset(s.value for s in JobState if s not in TERMINAL),
    "ended": frozenset(s.value for s in TERMINAL),
    "failed": frozenset(s.value for s in TERMINAL - {JobState.SUCCEEDED, JobState.CANCELLED}),
}


def whoami() -> str:
    """user@host of this user, as a job's submitter is recorded without ACLs."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


@dataclass(frozen=True)
class JobRow:
    """One job as the list shows it; `problem` says why a damaged record is damaged."""

    job_id: str
    state: JobState | None  # None: damaged
    run: str
    gpu: str
    user: str
    worker: str
    created_at: float | None
    updated_at: float | None
    fields: Mapping[str, str | None]  # the raw summary fields (held time)
    problem: str = ""
    progress: Reading | None = None  # the run's, as last read from its console
    limit: Limit | None = None  # its own time limit on the VM, once it started there

    @property
    def state_value(self) -> str:
        return DAMAGED if self.state is None else self.state.value

    def elapsed_s(self, now: float) -> float | None:
        """Submission to now, or to its end for an ended job."""
        if self.created_at is None:
            return None
        ended = self.state in TERMINAL and self.updated_at is not None
        end = self.updated_at if ended and self.updated_at is not None else now
        return max(end - self.created_at, 0.0)

    def held_s(self, now: float) -> float | None:
        try:
            return rates.held_s(self.fields, now)
        except ValueError:
            return None

    def cu(self, now: float) -> float | None:
        """Compute units so far: the GPU's rate times the time it was held."""
        held = self.held_s(now)
        return None if held is None else rates.units(self.gpu, held)


@dataclass(frozen=True)
class Filters:
    states: frozenset[str] | None = None  # state values, or `damaged`
    run_glob: str | None = None
    since: float | None = None  # epoch s: submitted at or after
    user: str | None = None

    @property
    def by_fields(self) -> bool:
        """Whether records must be read to know which match (else the index alone says)."""
        return bool(self.states or self.run_glob or self.user is not None)

    @property
    def fields(self) -> tuple[str, ...]:
        """The summary fields these filters read."""
        names = ["state"] if self.states else []
        if self.run_glob or self.user is not None:
            names += ["run_name", "user"]
        return tuple(names)

    @property
    def live_only(self) -> bool:
        """Whether only live jobs can match: then the ledger's index of them is the candidates
        (a ledger holds far more ended jobs than live ones)."""
        return bool(self.states) and self.states is not None and self.states <= GROUPS["live"]

    def match(self, state: str, run: str, user: str) -> bool:
        if self.states and state not in self.states:
            return False
        if self.run_glob and not fnmatch.fnmatchcase(run, self.run_glob):
            return False
        return self.user is None or user == self.user

    def keep(self, row: JobRow) -> bool:
        return self.match(row.state_value, row.run, row.user)


def parse_states(values: Iterable[str]) -> frozenset[str] | None:
    """`--state` values (state names in any case, `live`, `ended`, `failed`, `damaged`)."""
    known = {s.value for s in JobState} | {DAMAGED}
    out: set[str] = set()
    for raw in values:
        v = raw.strip().lower()
        if v in GROUPS:
            out |= GROUPS[v]
        elif v in known:
            out.add(v)
        else:
            names = ", ".join([*GROUPS, *(s.name for s in JobState), DAMAGED.upper()])
            raise UserInputError(f"--state {raw!r} is not a state: use one of {names}.")
    return frozenset(out) or None


def parse_since(text: str, now: float) -> float:
    """`--since`: a duration back from `now` (2h, 3d, 1h30m) or an ISO date or time (local
    time unless it names a zone) -> epoch seconds."""
    try:
        return now - parse_duration_s(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise UserInputError(
            f"--since {text!r} is neither a duration like 2h or 3d nor a date like 2026-05-01 "
            "(or 2026-05-01T14:00)."
        ) from None


@dataclass(frozen=True)
class Listing:
    """One page of the jobs that matched, newest first, with their short ids."""

    rows: list[JobRow]
    short: Mapping[str, str]
    matched: int
    page: int
    limit: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.matched // self.limit))


def read_listing(r: Any, keys: Keys, filters: Filters, *, limit: int, page: int) -> Listing:
    """Page `page` (from 1) of `limit` jobs matching `filters`: the index; with filters on
    fields, the fields they need of every candidate; then the page's rows (and the spec of
    any old record without summary fields). A round trip each, whatever the ledger's size."""
    pipe = r.pipeline(transaction=False)
    pipe.zrevrange(keys.jobs(), 0, -1)  # every id: short ids unique among all of them
    if filters.since is not None:
        pipe.zrevrangebyscore(keys.jobs(), "+inf", filters.since)
    if filters.live_only:
        pipe.smembers(keys.active())
    replies = pipe.execute()
    # Index members that are no job id are reported and skipped (`worker.records.ids`).
    known = ids.members("job id", replies[0], keys.jobs())
    candidates = known if filters.since is None else ids.members("job id", replies[1], keys.jobs())
    if filters.live_only:
        live = set(ids.members("job id", replies[-1], keys.active()))
        candidates = [i for i in candidates if i in live]
    start = (page - 1) * limit
    if filters.by_fields:
        candidates = find_matching(r, keys, candidates, filters)
    # Without filters on fields the index alone is the match. (A record that expired a moment
    # ago may still be counted; the janitor prunes the index.)
    shown = read_rows(r, keys, candidates[start : start + limit], progress=True)
    return Listing(shown, short_ids(known, [x.job_id for x in shown]), len(candidates), page, limit)


def find_matching(r: Any, keys: Keys, ids: Sequence[str], filters: Filters) -> list[str]:
    """The ids among `ids` whose record matches `filters`, in order, reading only the fields
    the filters need (the spec's JSON only for an old record without summary fields). Asked
    for damaged records, every summary field is read: any of them may be what is damaged."""
    if filters.states and DAMAGED in filters.states:
        return [row.job_id for row in read_rows(r, keys, ids) if filters.keep(row)]
    fields = filters.fields
    pipe = r.pipeline(transaction=False)
    for job_id in ids:
        if len(fields) == 1:  # HGET: a third cheaper than HMGET for redis-py to send and parse
            pipe.hget(keys.job(job_id), fields[0])
        else:
            pipe.hmget(keys.job(job_id), fields)
    replies = pipe.execute(raise_on_error=False) if ids else []
    seen: dict[str, dict[str, str | None]] = {}
    for job_id, reply in zip(ids, replies, strict=True):
        if isinstance(reply, Exception):  # a key of another type: damaged, never a match
            continue
        values = [reply] if len(fields) == 1 else reply
        if any(v is not None for v in values):  # all None: the record expired
            seen[job_id] = {f: None if v is None else v.decode(errors="replace") for f, v in
                            zip(fields, values, strict=True)}  # fmt: skip
    if "run_name" in fields:
        old = [job_id for job_id, d in seen.items() if d["run_name"] is None]
        for job_id, spec in (_specs(r, keys, old) if old else {}).items():
            seen[job_id].update(_from_spec(spec, []))
    return [job_id for job_id, d in seen.items() if _matches(filters, d)]


def _matches(filters: Filters, d: Mapping[str, str | None]) -> bool:
    state = d.get("state")
    value = state if state is not None and state in _STATE_VALUES else DAMAGED
    return filters.match(value, d.get("run_name") or "?", d.get("user") or "")


def read_rows(r: Any, keys: Keys, ids: Sequence[str], *, progress: bool = False) -> list[JobRow]:
    """The rows of `ids`, in order (with their runs' progress, in the same round trip, when
    `progress`); an id whose record is gone (expired) is left out."""
    pipe = r.pipeline(transaction=False)
    for job_id in ids:
        pipe.hmget(keys.job(job_id), SUMMARY_FIELDS)
        if progress:
            pipe.hmget(keys.watch(job_id), progress_record.FIELDS)
    replies = pipe.execute(raise_on_error=False) if ids else []
    summaries = replies[:: 2 if progress else 1]
    watched = dict(zip(ids, replies[1::2], strict=True)) if progress else {}
    found: list[tuple[str, dict[str, str | None]]] = []
    unreadable: dict[str, JobRow] = {}
    for job_id, values in zip(ids, summaries, strict=True):
        if isinstance(values, Exception):  # a key of another type (WRONGTYPE)
            why = f"not a job record: {str(values).splitlines()[0]}"
            unreadable[job_id] = JobRow(job_id, None, "?", "?", "", "", None, None, {}, why)
            found.append((job_id, {}))
        elif any(v is not None for v in values):
            d = {f: None if v is None else v.decode(errors="replace") for f, v in
                 zip(SUMMARY_FIELDS, values, strict=True)}  # fmt: skip
            found.append((job_id, d))
    old = [job_id for job_id, d in found if job_id not in unreadable and d["run_name"] is None]
    specs = _specs(r, keys, old) if old else {}
    rows = [unreadable.get(job_id) or make_row(job_id, d, specs.get(job_id)) for job_id, d in found]
    return [_with_progress(row, watched.get(row.job_id)) for row in rows]


def _with_progress(row: JobRow, values: object) -> JobRow:
    """`row` with its run's progress, when its watch hash holds a reading (a reply that is an
    error, a key of another type, holds none)."""
    if not isinstance(values, list) or row.state is None:
        return row
    reading, limit = progress_record.from_fields(values)
    return row if reading is None else replace(row, progress=reading, limit=limit)


def _specs(r: Any, keys: Keys, ids: list[str]) -> dict[str, bytes | None]:
    pipe = r.pipeline(transaction=False)
    for job_id in ids:
        pipe.hget(keys.job(job_id), "spec")
    replies = pipe.execute(raise_on_error=False)
    return {i: None if isinstance(v, Exception) else v for i, v in zip(ids, replies, strict=True)}


def make_row(job_id: str, d: Mapping[str, str | None], spec: bytes | None = None) -> JobRow:
    """A row from the summary fields (and, for an old record without them, its spec's JSON);
    whatever cannot be read makes it DAMAGED, with the rest shown."""
    problems: list[str] = []
    summary = dict(d)
    if summary.get("run_name") is None:
        summary.update(_from_spec(spec, problems))
    state: JobState | None = None
    try:
        state = JobState(summary.get("state") or "")
    except ValueError:
        problems.append(f"state {summary.get('state')!r} unknown" if summary.get("state")
                        else "no state")  # fmt: skip
    created, updated = (_number(summary, f, problems) for f in ("created_at", "updated_at"))
    try:
        rates.held_s(summary, 0.0)
    except ValueError:
        problems.append("held time not a number")
    if not summary.get("gpu"):
        problems.append("no gpu")
    return JobRow(
        job_id=job_id, state=None if problems else state, run=summary.get("run_name") or "?",
        gpu=summary.get("gpu") or "?", user=summary.get("user") or "",
        worker=summary.get("worker") or "", created_at=created, updated_at=updated,
        fields=summary, problem="; ".join(problems),
    )  # fmt: skip


def _from_spec(spec: bytes | None, problems: list[str]) -> dict[str, str | None]:
    """Run name, GPU and submitter of an old record (before summary fields), from its spec."""
    if spec is None:
        problems.append("no spec")
        return {}
    try:
        d = json.loads(spec)
        return {"run_name": str(d["run_name"]), "gpu": str(d["gpu"]),
                "user": str(d.get("submitted_by") or "")}  # fmt: skip
    except (ValueError, KeyError, TypeError):
        problems.append("spec unreadable")
        return {}


def _number(d: Mapping[str, str | None], name: str, problems: list[str]) -> float | None:
    try:
        return float(d[name] or "")
    except (ValueError, KeyError):
        problems.append(f"{name} missing or not a number")
        return None


def short_ids(known: Iterable[str], shown: Iterable[str]) -> dict[str, str]:
    """The shortest prefix of each shown id (at least MIN_ID_CHARS) that no other known id
    shares, so that it resolves to that job alone (git's short hashes)."""
    ids = sorted(set(known).union(shown))
    out = {}
    for job_id in shown:
        i = bisect_left(ids, job_id)
        near = [ids[j] for j in (i - 1, i + 1) if 0 <= j < len(ids)]
        need = max((_common(job_id, other) + 1 for other in near), default=0)
        out[job_id] = job_id[: max(MIN_ID_CHARS, need)]
    return out


def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
