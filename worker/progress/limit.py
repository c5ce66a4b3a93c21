"""A run's projected end against its own time limit (`--ttl`: what `timeout` gives the job on
the VM, counted from its start there), and what is said when it will not fit. Pure.

A projection is believed only once its rate was measured over `min_span_s` (5 % of the limit,
10 s to 10 min: early, but not from the first few steps) and it overshoots by `margin_s` (2 % of
the limit); a run that is done overshoots nothing. Whoever acts on it (`guard`) says so once.
"""

from __future__ import annotations

from dataclasses import dataclass

from worker.progress.record import Limit, Reading
from worker.utils import format_duration_s


@dataclass(frozen=True)
class Projection:
    eta_at: float  # when the run ends at its rate
    limit: Limit

    @property
    def over_s(self) -> float:
        """How long past its time limit the run would end (negative: before it)."""
        return self.eta_at - self.limit.at


def min_span_s(ttl_s: float) -> float:
    return min(max(0.05 * ttl_s, 10.0), 600.0)


def margin_s(ttl_s: float) -> float:
    return max(0.02 * ttl_s, 1.0)


def project(reading: Reading | None, limit: Limit | None) -> Projection | None:
    """The run's end at its rate beside its time limit; None without either."""
    eta = reading.eta_at if reading is not None else None
    if eta is None or limit is None:
        return None
    return Projection(eta, limit)


def overrun(reading: Reading | None, limit: Limit | None) -> Projection | None:
    """The projection, when it is believed and ends past the limit; else None."""
    p = project(reading, limit)
    if p is None or reading is None or (reading.fraction or 0.0) >= 1.0:
        return None
    if reading.span_s < min_span_s(p.limit.ttl_s) or p.over_s < margin_s(p.limit.ttl_s):
        return None
    return p


def rate_text(per_s: float, unit: str) -> str:
    """`4.9 it/s`, `0.5 steps/s`; under 0.1 a second, the time per unit: `8m20s/epoch`."""
    if per_s <= 0:
        return f"no {plural(unit)} lately"
    if per_s >= 0.1:
        return f"{per_s:.3g} {plural(unit)}/s"
    return f"{format_duration_s(1 / per_s)}/{unit}"


def plural(unit: str) -> str:
    return f"{unit}s" if unit in ("step", "epoch") else unit


def warning(reading: Reading, p: Projection) -> str:
    """The overrun warning: one line, with what to do next."""
    done = f"{reading.fraction:.0%} done" if reading.fraction is not None else "under way"
    rate = rate_text(reading.rate_per_s or 0.0, reading.unit)
    ran = format_duration_s(max(reading.at - p.limit.started_at, 0.0))
    return (
        f"at this rate ({rate}, {done} after {ran}) it ends {format_duration_s(p.over_s)} after "
        f"its {format_duration_s(p.limit.ttl_s)} time limit: checkpoint, or resubmit with a "
        "longer --ttl (and --wall)"
    )
