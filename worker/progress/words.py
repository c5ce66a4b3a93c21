"""A run's progress in words and as data: one line for `status JOB`, a short cell for the list,
the object `--json` and the Python API carry, the text Flower shows, the final report's entry,
and the seconds per epoch it measured (the next pre-flight's ETA). Times are in the local zone
of whoever reads them (`status` runs on the user's machine). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from worker.progress.limit import overrun, project, rate_text
from worker.progress.record import Limit, Reading
from worker.utils import format_duration_s

STALE_S = 60.0  # a reading older than this is shown with its age


def _num(value: float) -> str:
    return f"{value:g}" if value == int(value) else f"{value:.3g}"


def done_text(r: Reading) -> str:
    """`45% (45/100 it)`, `24% (epoch 2.4 of 10)`; without a total, `epoch 2.4`, `4500 it`."""
    if r.unit == "epoch":
        body = f"epoch {r.done:.3g}" + (f" of {_num(r.total)}" if r.total else "")
    else:
        body = f"{_num(r.done)}/{_num(r.total)} {r.unit}" if r.total else f"{_num(r.done)} {r.unit}"
    frac = r.fraction
    return f"{math.floor(frac * 100)}% ({body})" if frac is not None else body


def local_time(at: float, now: float, *, short: bool = False) -> str:
    """`14:32 CEST` today, else `Tue 2026-05-05 14:32 CEST` (`Tue 14:32` when `short`)."""
    moment = datetime.fromtimestamp(at).astimezone()
    if moment.date() == datetime.fromtimestamp(now).astimezone().date():
        return moment.strftime("%H:%M" if short else "%H:%M %Z")
    return moment.strftime("%a %H:%M" if short else "%a %Y-%m-%d %H:%M %Z")


def summary(r: Reading, limit: Limit | None, now: float) -> str:
    """One line: how far, how fast, when it ends (local time), and past its limit by how much."""
    parts = [done_text(r)]
    if r.rate_per_s is not None:
        parts.append(rate_text(r.rate_per_s, r.unit))
    eta = r.eta_at
    if eta is not None:
        parts.append(f"ETA {local_time(eta, now)}")
    p = project(r, limit)
    if p is not None and p.over_s > 0:
        parts.append(f"{format_duration_s(p.over_s)} past its time limit")
    if now - r.at >= STALE_S:
        parts.append(f"as of {format_duration_s(now - r.at)} ago")
    return ", ".join(parts)


def cell(r: Reading, limit: Limit | None, now: float, *, live: bool) -> str:
    """The list's cell: `45% 4.9it/s 14:32` (`!` when it projects past its limit); an ended
    job's, how far it got."""
    frac = r.fraction
    head = f"{math.floor(frac * 100)}%" if frac is not None else done_text(r)
    if not live:
        return head
    parts = [head]
    if r.rate_per_s is not None:
        parts.append(rate_text(r.rate_per_s, r.unit).replace(" ", ""))
    eta = r.eta_at
    if eta is not None:
        parts.append(local_time(eta, now, short=True) + ("!" if overrun(r, limit) else ""))
    return " ".join(parts)


def to_json(r: Reading, limit: Limit | None, now: float) -> dict[str, Any]:
    """What `--json`, the API and `/metrics` say of a run's progress."""
    p = project(r, limit)
    eta = r.eta_at
    return {
        "fraction": r.fraction, "done": r.done, "total": r.total, "unit": r.unit,
        "source": r.source, "rate_per_s": r.rate_per_s,
        "rate": rate_text(r.rate_per_s, r.unit) if r.rate_per_s is not None else None,
        "eta_at": eta, "eta_local": local_time(eta, now) if eta is not None else None,
        "seen_at": r.at, "time_limit_at": limit.at if limit is not None else None,
        "over_limit_s": p.over_s if p is not None else None,
        "projected_overrun": overrun(r, limit) is not None,
    }  # fmt: skip


def flower_text(r: Reading, limit: Limit | None, now: float) -> str:
    """What Flower's job page shows while the job runs (the worker host's local time)."""
    return f"progress: {summary(r, limit, now)}"


def epoch_s(
    unit: str, per_s: float | None, total: float | None, epochs: float | None
) -> float | None:
    """Seconds per epoch at `per_s`: its inverse for epochs; else the run's length in its unit
    over its epochs (the job's `--epochs`), when both are known."""
    if not per_s or per_s <= 0:
        return None
    if unit == "epoch":
        return 1.0 / per_s
    if total and epochs:
        return total / per_s / epochs
    return None


def report(r: Reading | None, epochs: float | None) -> dict[str, Any] | None:
    """The final report's `progress`: the rate measured over the segment, in its unit."""
    if r is None:
        return None
    rate = r.mean_rate_per_s
    return {
        "done": r.done, "total": r.total, "fraction": r.fraction, "unit": r.unit,
        "source": r.source, "rate_per_s": rate, "measured_s": round(r.measured_s, 1),
        "epoch_s": epoch_s(r.unit, rate, r.total, epochs),
    }  # fmt: skip


def report_text(entry: Mapping[str, Any]) -> str | None:
    """The report's `progress` in words: `measured 4.9 it/s over 9m40s (100% (100/100 it))`."""
    rate, unit, took = entry.get("rate_per_s"), entry.get("unit"), entry.get("measured_s")
    if not isinstance(unit, str) or not isinstance(took, int | float):
        return None
    done = entry.get("fraction")
    how_far = f", {math.floor(done * 100)}% done" if isinstance(done, int | float) else ""
    if not isinstance(rate, int | float):
        return f"no rate measured{how_far}"
    text = f"measured {rate_text(float(rate), unit)} over {format_duration_s(float(took))}{how_far}"
    per = entry.get("epoch_s")
    return text + (f" ({format_duration_s(float(per))}/epoch)" if isinstance(per, int | float)
                   and unit != "epoch" else "")  # fmt: skip


def measured_epoch_s(report_entry: object) -> float | None:
    """Seconds per epoch from a final report's `progress` (read back: checked)."""
    if not isinstance(report_entry, Mapping):
        return None
    v = report_entry.get("epoch_s")
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        return None
    return float(v)
