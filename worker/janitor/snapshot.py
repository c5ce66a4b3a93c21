"""What a janitor pass reads from the ledger, in a few pipelined round trips.

The jobs not yet terminal (the `active` set) without a live lease, and those whose lease
expired, are read field by field (never their specs: a pass over 10,000 jobs decodes none), with
their lock, their watchdog's observations and their cancel flag; then, for the endpoints the
account lists, the jobs they belong to and when a pass first saw them. Reading changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from worker.records.ledger import Ledger
from worker.states import JobState

_JOB_FIELDS = ("state", "owner", "endpoint", "session", "created_at", "updated_at", "resent_at",
               "results_local", "pending_outcome")  # fmt: skip
_WATCH_FIELDS = ("heartbeat_at", "gone_verified_at", "exec_exit", "exec_final_upload",
                 "results_local", "endpoint")  # fmt: skip


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


@dataclass(frozen=True)
class Snapshot:
    now: float
    jobs: tuple[JobView, ...]
    expired_leases: tuple[str, ...]


def _s(v: Any) -> str | None:
    return v.decode() if isinstance(v, bytes) else None


def _f(v: Any) -> float | None:
    try:
        return float(v.decode()) if isinstance(v, bytes) else None
    except ValueError:
        return None


def read_snapshot(ledger: Ledger) -> Snapshot:
    now = ledger.clock.time()
    k, r = ledger.keys, ledger.r
    pipe = r.pipeline(transaction=False)
    pipe.smembers(k.active())
    pipe.zrangebyscore(k.leases(), "-inf", now)
    pipe.zrangebyscore(k.leases(), f"({now!r}", "+inf")
    active_raw, expired_raw, live_raw = pipe.execute()
    expired = sorted(x.decode() for x in expired_raw)
    # A job whose lease is live has an owner that renews it: nothing for a pass to do, so it is
    # not read (the account's assignments read the jobs they name, live or not).
    live = {x.decode() for x in live_raw}
    ids = sorted(({x.decode() for x in active_raw} - live) | set(expired))
    return Snapshot(now, tuple(read_views(ledger, ids, set(expired))), tuple(expired))


def read_views(ledger: Ledger, ids: list[str], expired: set[str] | None = None) -> list[JobView]:
    """The jobs `ids`, in one round trip."""
    k = ledger.keys
    pipe = ledger.r.pipeline(transaction=False)
    for job_id in ids:
        pipe.hmget(k.job(job_id), _JOB_FIELDS)
        pipe.hmget(k.watch(job_id), _WATCH_FIELDS)
        pipe.exists(k.lock(job_id))
        pipe.exists(k.cancel(job_id))
    replies = pipe.execute() if ids else []
    views = []
    for i, job_id in enumerate(ids):
        job, watch, lock, cancel = replies[4 * i : 4 * i + 4]
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
                endpoint=_s(job[2]) or _s(watch[5]),
                session=_s(job[3]),
                created_at=_f(job[4]) or 0.0,
                lock_held=bool(lock),
                watchdog_beat_at=_f(watch[0]),
                gone_verified=watch[1] is not None,
                exec_exit=_s(watch[2]),
                final_upload=_s(watch[3]),
                results_local=_s(job[7]) or _s(watch[4]),
                cancel=bool(cancel),
                resent_at=_f(job[6]),
                lease_expired=job_id in (expired or set()),
            )
        )
    return views


def read_endpoint_owners(
    ledger: Ledger, endpoints: list[str]
) -> tuple[dict[str, str], dict[str, float]]:
    """(endpoint -> job id, endpoint -> first seen) for the endpoints the account lists."""
    if not endpoints:
        return {}, {}
    pipe = ledger.r.pipeline(transaction=False)
    pipe.hmget(ledger.keys.endpoints(), endpoints)
    pipe.hgetall(ledger.keys.first_seen())
    owners_raw, seen_raw = pipe.execute()
    owners = {ep: j.decode() for ep, j in zip(endpoints, owners_raw, strict=True) if j}
    seen = {}
    for ep, at in seen_raw.items():
        try:
            seen[ep.decode()] = float(at)
        except ValueError:
            continue
    return owners, seen
