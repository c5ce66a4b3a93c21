"""Reading what the quotas count, for `colabq quota` and `colabq budget` (never the claim's own
reads, which are in its script): each scope's running jobs and their units so far, its units
ended in the current day, week and month, its waiting jobs, and the endings of the last two days.
Every value read back is checked: a member whose record is over, gone or back in the queue
unowned is not counted (as the claim drops it), a sum that is not a number counts as `inf` (as
the claim reads it: the scope waits out the period), an ending that does not parse is skipped.
Two or three pipelined round trips however many scopes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from worker.colab import rates
from worker.quota.check import ScopeUse
from worker.quota.limits import Scope, job_quota_user
from worker.quota.periods import Period
from worker.records.keys import Keys
from worker.states import TERMINAL, JobState

_OVER = frozenset(s.value for s in TERMINAL)


def _text(raw: Any) -> str:
    return raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw or "")


def _number(raw: Any) -> float | None:
    """A stored figure: None when absent, `inf` when it is not a finite number >= 0."""
    if raw is None:
        return None
    try:
        value = float(_text(raw))
    except ValueError:
        return math.inf
    return value if math.isfinite(value) and value >= 0 else math.inf


_HELD = ("state", "owner", "gpu", "held_s", "held_since")


def live_held(fields: Sequence[Any], now: float) -> tuple[float, float] | None:
    """The held seconds and units so far of a job whose (state, owner, gpu, held_s, held_since)
    are `fields`, or None when it does not run (over, gone, or back in the queue unowned)."""
    state, owner = _text(fields[0]), _text(fields[1])
    if not state or state in _OVER or (state == JobState.QUEUED.value and not owner):
        return None
    held, since = _number(fields[3]) or 0.0, _number(fields[4])
    held = held if math.isfinite(held) else 0.0  # damaged: nothing, as the claim counts it
    if since is not None and math.isfinite(since):
        held += max(now - since, 0.0)
    return held, rates.units(_text(fields[2]), held) or 0.0


def read_use(
    r: Any, keys: Keys, scopes: Iterable[Scope], periods: Sequence[Period], now: float
) -> dict[Scope, tuple[ScopeUse, int]]:
    """Each scope's use and how many of its jobs wait for a quota."""
    scopes = list(scopes)
    pipe = r.pipeline(transaction=False)
    for s in scopes:
        pipe.smembers(keys.quota_running(s.kind, s.name))
        pipe.zcard(keys.quota_waiting(s.kind, s.name))
        for p in periods:
            pipe.hget(keys.quota_spent(p.name, p.period_id), f"{s.kind}|{s.name}")
    first = pipe.execute()
    step = 2 + len(periods)
    members = [sorted(_text(m) for m in first[i * step]) for i in range(len(scopes))]
    pipe = r.pipeline(transaction=False)
    for ids in members:
        for m in ids:
            pipe.hmget(keys.job(m), *_HELD)
    rows = iter(pipe.execute())
    out: dict[Scope, tuple[ScopeUse, int]] = {}
    for i, s in enumerate(scopes):
        live = [h[1] for _ in members[i] if (h := live_held(next(rows), now)) is not None]
        base = first[i * step : (i + 1) * step]
        spent = {p.name: _number(v) or 0.0 for p, v in zip(periods, base[2:], strict=True)}
        out[s] = (ScopeUse(len(live), math.fsum(live), spent), int(base[1]))
    return out


@dataclass(frozen=True)
class Ending:
    """A job's end as the quotas remembered it (`Keys.quota_ended`)."""

    job: str
    user: str
    account: str
    held_s: float
    units: float
    at: float


def read_endings(r: Any, keys: Keys, since: float) -> list[Ending]:
    """The endings since `since` (at most two days back), oldest first."""
    out = []
    for raw, at in r.zrangebyscore(keys.quota_ended(), since, "+inf", withscores=True):
        try:
            d = json.loads(raw)
            e = Ending(str(d["job"]), str(d["user"]), str(d["account"]), float(d["held_s"]),
                       float(d["units"]), float(at))  # fmt: skip
        except (ValueError, KeyError, TypeError):
            continue
        if all(math.isfinite(x) and x >= 0 for x in (e.held_s, e.units, e.at)):
            out.append(e)
    return out


@dataclass(frozen=True)
class Live:
    """A running job: whose, and what it has held so far (its stretch ends now)."""

    job: str
    user: str
    account: str
    held_s: float
    units: float


def read_live(r: Any, keys: Keys, now: float) -> list[Live]:
    """The jobs not over that run (claimed), with their user and account as the quotas count
    them (as the claim recorded them; a job claimed before quotas: its owner and account)."""
    ids = sorted(_text(m) for m in r.smembers(keys.active()))
    pipe = r.pipeline(transaction=False)
    for job_id in ids:
        pipe.hmget(keys.job(job_id), *_HELD, "quota_user", "quota_account", "user", "account")
    out = []
    for job_id, f in zip(ids, pipe.execute(), strict=True):
        held = live_held(f, now)
        if held is None or not _text(f[1]):
            continue
        user = _text(f[5]) or job_quota_user(job_id, _text(f[7]))
        out.append(Live(job_id, user, _text(f[6]) or _text(f[8]), held[0], held[1]))
    return out
