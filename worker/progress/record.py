"""The stored reading of a run's progress: `exec_progress` in the job's watch hash, a small JSON
object the attach client writes with the console lines it came from (at most every few seconds),
cleared with the segment's other `exec_` fields when a new segment starts.

Read back by `status`, the API, `/metrics`, the owner's guard and the final report, it is trusted
for nothing: `decode` keeps a reading only when every field has its type and a sane value, and
says None otherwise (as for no reading at all). The job's time limit comes with it from the same
hash: the wrapper's `STARTED` and `TTL` sentinels (`exec_started`, `exec_ttl`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from worker.progress.rate import Sample, eta_at
from worker.progress.track import SOURCES

FIELD = "exec_progress"
# The watch hash's fields a reader takes, in this order (`limits_of` reads the last two).
FIELDS = (FIELD, "exec_started", "exec_ttl")
MAX_CHARS = 4096
MAX_VALUE = 1e15
_UNIT = re.compile(r"[A-Za-z][A-Za-z_]{0,15}")


@dataclass(frozen=True)
class Reading:
    """Where the run was when last seen, and the rate it went at."""

    at: float  # when the latest progress was seen (epoch s, the worker host's clock)
    done: float
    total: float | None  # None: the run's length is not known
    unit: str  # "epoch", "step", or a bar's own unit ("it", "img", ...)
    source: str  # which format said it (`track.SOURCES`)
    rate_per_s: float | None  # over the last few minutes; None: not measured yet
    span_s: float  # what the rate was measured over
    first_at: float  # the segment's first reading (the mean rate's start)
    first_done: float
    state: Mapping[str, Any] = field(default_factory=dict)  # `Tracker.state()`

    @property
    def fraction(self) -> float | None:
        if not self.total:
            return None
        return min(max(self.done / self.total, 0.0), 1.0)

    @property
    def eta_at(self) -> float | None:
        return eta_at(Sample(self.at, self.done), self.total, self.rate_per_s)

    @property
    def measured_s(self) -> float:
        return max(self.at - self.first_at, 0.0)

    @property
    def mean_rate_per_s(self) -> float | None:
        span = self.measured_s
        return max(self.done - self.first_done, 0.0) / span if span > 0 else None


def encode(r: Reading) -> str:
    d: dict[str, Any] = {
        "v": 1, "at": round(r.at, 3), "done": r.done, "total": r.total, "unit": r.unit,
        "source": r.source, "rate": r.rate_per_s, "span": round(r.span_s, 3),
        "first_at": round(r.first_at, 3), "first_done": r.first_done,
    }  # fmt: skip
    if r.state:
        d["state"] = dict(r.state)
    return json.dumps(d, separators=(",", ":"))


def _number(value: object, *, lo: float = 0.0) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) and lo <= v <= MAX_VALUE else None


def decode(raw: str | bytes | None) -> Reading | None:
    """A reading from the stored JSON, or None when there is none or it is not well-formed."""
    if not isinstance(raw, str | bytes) or len(raw) > MAX_CHARS:
        return None
    try:
        d = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(d, dict) or d.get("v") != 1:
        return None
    at, done, first_at, first_done = (_number(d.get(k)) for k in ("at", "done", "first_at",
                                                                   "first_done"))  # fmt: skip
    span = _number(d.get("span"))
    total = _number(d.get("total")) if d.get("total") is not None else None
    rate = _number(d.get("rate")) if d.get("rate") is not None else None
    unit, source, state = d.get("unit"), d.get("source"), d.get("state", {})
    if None in (at, done, first_at, first_done, span) or not isinstance(unit, str):
        return None
    if (d.get("total") is not None and not total) or (d.get("rate") is not None and rate is None):
        return None
    if not _UNIT.fullmatch(unit) or source not in SOURCES or not isinstance(state, dict):
        return None
    assert at is not None and done is not None and first_at is not None and span is not None
    assert first_done is not None
    if first_at > at or first_done > done:
        return None
    return Reading(at, done, total, unit, str(source), rate, span, first_at, first_done, state)


@dataclass(frozen=True)
class Limit:
    """The job's own time limit on the VM: it started at `started_at` with `ttl_s` to run."""

    started_at: float
    ttl_s: float

    @property
    def at(self) -> float:
        return self.started_at + self.ttl_s


def limit_of(started: str | bytes | None, ttl: str | bytes | None) -> Limit | None:
    """From the wrapper's `STARTED` (epoch s) and `TTL` (s) sentinels, when both are sane."""
    try:
        s = float(started) if started is not None else math.nan
        t = float(ttl) if ttl is not None else math.nan
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(s) and math.isfinite(t)) or s <= 0 or not 0 < t <= 31 * 86400:
        return None
    return Limit(s, t)


def from_fields(values: Sequence[str | bytes | None]) -> tuple[Reading | None, Limit | None]:
    """What the watch hash's `FIELDS` say, as HMGET returned them (a reply of another shape
    says nothing)."""
    if len(values) != len(FIELDS):
        return None, None
    raw, started, ttl = values
    return decode(raw), limit_of(started, ttl)


def from_watch(watch: Mapping[str, str]) -> tuple[Reading | None, Limit | None]:
    return from_fields([watch.get(f) for f in FIELDS])


def read(r: Any, watch_key: str) -> tuple[Reading | None, Limit | None]:
    """One HMGET of the job's watch hash."""
    return from_fields(r.hmget(watch_key, FIELDS))
