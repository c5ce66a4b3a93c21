"""What a job's GPU costs: Colab's compute units per hour for each GPU type, the time a job has
held its GPU (from the `held_s` and `held_since` fields the ledger keeps on its record), and the
units that makes.

The ledger's `transition` keeps the two fields (the clock starts when the assignment's endpoint
is recorded and stops when the job leaves RELEASING); this module only reads them, with `now`
given, so `colabq status`, the final report and the tests agree on the arithmetic. The rates
are Colab's published ones (the emulator bills with the same table; a test checks they agree).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

RATES_PER_HOUR: Mapping[str, float] = MappingProxyType(
    {"T4": 1.76, "L4": 4.82, "G4": 5.30, "A100": 11.77, "H100": 15.04}
)


def rate_per_hour(gpu: str) -> float | None:
    """Compute units per hour of `gpu` (any case); None for a type colabq does not know."""
    return RATES_PER_HOUR.get(gpu.upper())


def units(gpu: str, held_s: float) -> float | None:
    """Compute units of holding `gpu` for `held_s` seconds; None for an unknown GPU type."""
    rate = rate_per_hour(gpu)
    return None if rate is None else rate * max(held_s, 0.0) / 3600.0


def held_s(fields: Mapping[str, str | None], now: float) -> float:
    """Seconds a job has held its GPU by `now`: the closed segments (`held_s`) plus the open
    one (`now - held_since`) while a session may be assigned. Raises ValueError on a field
    that is not a number (a damaged record)."""
    total = float(fields.get("held_s") or 0.0)
    since = fields.get("held_since")
    if since:
        total += max(now - float(since), 0.0)
    return total


def costs(
    gpu: str, created_at: float, fields: Mapping[str, str | None], now: float
) -> dict[str, object]:
    """The final report's `duration` (submission to `now`, and the GPU held) and
    `compute_units` (that held time at the GPU's rate), from a job's record."""
    held = held_s(fields, now)
    return {
        "duration": {"total_s": round(now - created_at, 1), "held_s": round(held, 1)},
        "compute_units": {
            "units": round(units(gpu, held) or 0.0, 4),
            "gpu": gpu,
            "rate_per_hour": rate_per_hour(gpu),
        },
    }


def report_costs(report: Mapping[str, Any] | None) -> tuple[float, float] | None:
    """The held seconds and compute units a final report says, as it says them (None for no
    report, or one without them): what `colabq usage` and the metrics count for an ended job."""
    if not report:
        return None
    try:
        return float(report["duration"]["held_s"]), float(report["compute_units"]["units"])
    except (KeyError, TypeError, ValueError):
        return None
