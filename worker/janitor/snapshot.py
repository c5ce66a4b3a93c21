"""What a janitor pass reads from the ledger, in a few pipelined round trips.

The jobs not yet terminal (the `active` set) without a live lease, and those whose lease
expired, are read field by field (never their specs: a pass over 10,000 jobs decodes none), with
their lock, their watchdog's observations and their cancel flag; then, for the endpoints the
account lists, the jobs they belong to and when a pass first saw them; and the ended jobs whose
tracker run is still to be checked (their state, reason and run, in the same round trips).
Reading changes nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from worker.records import ids
from worker.records.ledger import Ledger
from worker.states import JobState

_JOB_FIELDS = ("state", "owner", "endpoint", "session", "created_at", "updated_at", "resent_at",
               "results_local", "pending_outcome", "reason", "retry_at", "account")  # fmt: skip
_WATCH_FIELDS = ("heartbeat_at", "gone_verified_at", "exec_exit", "exec_final_upload",
                 "results_local", "endpoint")  # fmt: skip
_TRACKED_FIELDS = ("state", "reason", "tracker_run")
# A pass checks at most this many ended jobs' tracker runs (the oldest first): each is a remote
# call, and the rest wait for the next pass.
TRACKED_PER_PASS = 50


@dataclass(frozen=True)
class JobView:
    """One job as a pass sees it."""

    job_id: str
    state: JobState | None  # None: the record is gone (expired) or damaged
    owner: str
    endpoint: str | None
    session: str | None
    created_at: float
    lock_held: bool  # its owner's lease is live
    watchdog_beat_at: float | None
    gone_verified: bool
    exec_exit: str | None
    final_upload: str | None
    results_local: str | None
    cancel: bool
    resent_at: float | None
    lease_expired: bool
    reason: str = ""
    retry_at: float | None = None  # a job waiting for a GPU: its next try
    account: str | None = None  # the Colab account its VM is on (None: recorded none)


@dataclass(frozen=True)
class TrackedRun:
    """An ended job whose tracker run colabq opened: the janitor checks it was closed."""

    job_id: str
    ref: str | None  # the job's `tracker_run`; None: the record is gone
    state: JobState | None
    reason: str
    ended_at: float


@dataclass(frozen=True)
class Junk:
    """A member of an index that is no job id (`ids`): reported, never read as a job, and
    dropped from the index by a pass that acts (the janitor prunes these indexes anyway)."""

    key: str
    raw: bytes

    @property
    def shown(self) -> str:
        return ids.shown(self.raw)


@dataclass(frozen=True)
class Snapshot:
    now: float
    jobs: tuple[JobView, ...]
    expired_leases: tuple[str, ...]
    tracked: tuple[TrackedRun, ...] = ()
    junk: tuple[Junk, ...] = ()


def _s(v: Any) -> str | None:
    return v.decode(errors="replace") if isinstance(v, bytes) else None


def _f(v: Any) -> float | None:
    try:
        f = float(v.decode()) if isinstance(v, bytes) else None
    except ValueError:  # UnicodeDecodeError included
        return None
    return f if f is not None and math.isfinite(f) else None


def _split(key: str, raws: Any, junk: list[Junk]) -> list[str]:
    """The job ids among an index's members; the others reported and noted as junk."""
    good = []
    for raw in raws:
        job_id = ids.job_id(raw)
        if job_id is None:
            ids.report("job id", key, raw)
            junk.append(Junk(key, raw if isinstance(raw, bytes) else str(raw).encode()))
        else:
            good.append(job_id)
    return good


def read_snapshot(ledger: Ledger) -> Snapshot:
    now = ledger.clock.time()
    k, r = ledger.keys, ledger.r
    pipe = r.pipeline(transaction=False)
    pipe.smembers(k.active())
    pipe.zrangebyscore(k.leases(), "-inf", now)
    pipe.zrangebyscore(k.leases(), f"({now!r}", "+inf")
    pipe.zrange(k.tracker_check(), 0, TRACKED_PER_PASS - 1, withscores=True)
    active_raw, expired_raw, live_raw, tracked_raw = pipe.execute()
    junk: list[Junk] = []
    expired = sorted(set(_split(k.leases(), expired_raw, junk)))
    # A job whose lease is live has an owner that renews it: nothing for a pass to do, so it is
    # not read (the account's assignments read the jobs they name, live or not).
    live = set(_split(k.leases(), live_raw, junk))
    wanted = sorted((set(_split(k.active(), active_raw, junk)) - live) | set(expired))
    tracked_ids = _split(k.tracker_check(), [x for x, _ in tracked_raw], junk)
    tracked = [(i, at) for i, (_, at) in zip(tracked_ids, _good(tracked_raw), strict=True)]
    pipe = r.pipeline(transaction=False)
    _queue_views(pipe, ledger, wanted)
    for job_id, _ in tracked:
        pipe.hmget(k.job(job_id), _TRACKED_FIELDS)
    # One key of another type (a Redis error on one key) damages its own job's view alone.
    replies = pipe.execute(raise_on_error=False) if wanted or tracked else []
    views = _parse_views(wanted, replies[: 4 * len(wanted)], set(expired))
    runs = [
        _tracked(job_id, at, raw)
        for (job_id, at), raw in zip(tracked, replies[4 * len(wanted) :], strict=True)
    ]
    return Snapshot(now, tuple(views), tuple(expired), tuple(runs), tuple(junk))


def _good(rows: Any) -> list[tuple[Any, float]]:
    """The (member, score) rows of the tracker-check index whose member is a job id."""
    return [(x, float(at)) for x, at in rows if ids.job_id(x) is not None]


def _tracked(job_id: str, ended_at: float, raw: Any) -> TrackedRun:
    if isinstance(raw, Exception):
        return TrackedRun(job_id, None, None, "", ended_at)
    state_raw = _s(raw[0])
    try:
        state = JobState(state_raw) if state_raw else None
    except ValueError:
        state = None
    return TrackedRun(job_id, _s(raw[2]), state, _s(raw[1]) or "", ended_at)


def read_views(
    ledger: Ledger, job_ids: list[str], expired: set[str] | None = None
) -> list[JobView]:
    """The jobs `job_ids` (job ids, checked where they were read), in one round trip."""
    pipe = ledger.r.pipeline(transaction=False)
    _queue_views(pipe, ledger, job_ids)
    return _parse_views(job_ids, pipe.execute(raise_on_error=False) if job_ids else [], expired)


def _queue_views(pipe: Any, ledger: Ledger, ids: list[str]) -> None:
    k = ledger.keys
    for job_id in ids:
        pipe.hmget(k.job(job_id), _JOB_FIELDS)
        pipe.hmget(k.watch(job_id), _WATCH_FIELDS)
        pipe.exists(k.lock(job_id))
        pipe.exists(k.cancel(job_id))


def _parse_views(job_ids: list[str], replies: list[Any], expired: set[str] | None) -> list[JobView]:
    views = []
    for i, job_id in enumerate(job_ids):
        job, watch, lock, cancel = replies[4 * i : 4 * i + 4]
        # A key of another type reads as nothing: no record (forgotten), no observations.
        job = [None] * len(_JOB_FIELDS) if isinstance(job, Exception) else job
        watch = [None] * len(_WATCH_FIELDS) if isinstance(watch, Exception) else watch
        state_raw = _s(job[0])
        try:
            state = JobState(state_raw) if state_raw else None
        except ValueError:
            state = None
        views.append(
            JobView(
                job_id=job_id,
                state=state,
                owner=_s(job[1]) or "",
                endpoint=ids.endpoint(job[2]) or ids.endpoint(watch[5]),
                session=ids.session(job[3]),
                created_at=_f(job[4]) or 0.0,
                lock_held=bool(lock) and not isinstance(lock, Exception),
                watchdog_beat_at=_f(watch[0]),
                gone_verified=watch[1] is not None,
                exec_exit=_s(watch[2]),
                final_upload=_s(watch[3]),
                results_local=_s(job[7]) or _s(watch[4]),
                cancel=bool(cancel) and not isinstance(cancel, Exception),
                resent_at=_f(job[6]),
                lease_expired=job_id in (expired or set()),
                reason=_s(job[9]) or "",
                retry_at=_f(job[10]),
                account=_s(job[11]),
            )
        )
    return views


def read_endpoint_owners(
    ledger: Ledger, endpoints: list[str], account: str = ""
) -> tuple[dict[str, str], dict[str, float]]:
    """(endpoint -> job id, endpoint -> first seen on `account`) for the endpoints the account
    lists."""
    if not endpoints:
        return {}, {}
    pipe = ledger.r.pipeline(transaction=False)
    pipe.hmget(ledger.keys.endpoints(), endpoints)
    pipe.hgetall(ledger.keys.first_seen(account))
    owners_raw, seen_raw = pipe.execute()
    owners = {}
    for ep, raw in zip(endpoints, owners_raw, strict=True):
        if raw is not None and (job_id := ids.job_id(raw)) is None:
            ids.report("job id", f"{ledger.keys.endpoints()} at {ids.shown(ep)}", raw)
        elif raw is not None and job_id is not None:
            owners[ep] = job_id
    seen = {}
    for ep, at in seen_raw.items():
        try:
            seen[ep.decode()] = float(at)
        except ValueError:  # UnicodeDecodeError included
            continue
    return owners, seen
