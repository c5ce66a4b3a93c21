"""The `eta` check: when the run will end, in local time, and whether it fits.

Owns hours = epochs x seconds-per-epoch / 3600, the end time in the local zone (named by
region beside its abbreviation), the quiet-window and time-limit judgements (the job's own
time limit inside the wall cap) and the advice that goes with them (defer to a start that
fits, or split into resumed segments). All arithmetic is on aware datetimes in UTC, so day
boundaries and DST changes come out right. Parsing windows is `worker/quiet.py`'s.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from producer.preflight.report import CheckName, Finding, Verdict
from worker.quiet import QuietInterval, QuietWindow, quiet_intervals

DEFER_HORIZON = timedelta(days=14)


def local_zone() -> ZoneInfo:
    """The system's zone, looked up when called (never at import)."""
    import tzlocal

    zone = tzlocal.get_localzone()
    return zone if isinstance(zone, ZoneInfo) else ZoneInfo(str(zone))


def zone_label(moment: datetime, zone: ZoneInfo) -> str:
    """`EDT (America/New_York)`: an abbreviation alone is ambiguous (IST, CST, BST …)."""
    abbreviation, region = moment.tzname() or "", getattr(zone, "key", None) or str(zone)
    return region if abbreviation in ("", region) else f"{abbreviation} ({region})"


def format_local(moment: datetime, zone: ZoneInfo) -> str:
    local = moment.astimezone(zone)
    return f"{local:%a %Y-%m-%d %H:%M} {zone_label(local, zone)}"


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


def _span(seconds: float) -> str:
    from worker.utils import format_duration_s

    return format_duration_s(seconds)


def _skip(saw: str, action: str) -> Finding:
    return Finding(CheckName.ETA, Verdict.SKIP, saw, action)


def _day_word(start: datetime, end: datetime) -> str:
    days = (end.date() - start.date()).days
    return {0: "today", 1: "tomorrow"}.get(days, f"in {days} days")


def _offset(moment: datetime) -> str:
    minutes = int((moment.utcoffset() or timedelta(0)).total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    return f"{moment.tzname()} UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _clock_change(start: datetime, end: datetime) -> str:
    if start.utcoffset() == end.utcoffset():
        return ""
    return f"; crosses a clock change ({_offset(start)} → {_offset(end)})"


def _fits_at(begin: datetime, duration: timedelta, busy: Sequence[QuietInterval]) -> bool:
    return not any(q.start < begin + duration and q.end > begin for q in busy)


def _defer_advice(
    now: datetime, duration: timedelta, windows: Sequence[QuietWindow], zone: ZoneInfo
) -> str:
    busy = quiet_intervals(windows, start=now, end=now + DEFER_HORIZON + duration, zone=zone)
    latest = now + DEFER_HORIZON  # past it, `busy` is not laid out: everything would "fit"
    for begin in sorted({q.end for q in busy if now < q.end <= latest}):
        if _fits_at(begin, duration, busy):
            return (
                f"defer the start to {format_local(begin, zone)} (then it ends "
                f"{format_local(begin + duration, zone)} outside every quiet window), "
                "or split it into resumed segments between the windows"
            )
    gaps = [b.start - a.end for a, b in itertools.pairwise(busy) if b.start > a.end]
    longest = max(gaps, default=timedelta(0))
    return (
        f"it cannot fit between quiet windows in the next {DEFER_HORIZON.days} days: split it "
        f"into resumed segments of ≤ {_hours(longest.total_seconds())} (the longest gap)"
    )


def _wall_cap_advice(total_s: float, epoch_s: float, wall_cap_s: float) -> str:
    per_segment = math.floor(wall_cap_s / epoch_s)
    if per_segment >= 1:
        segments = math.ceil(total_s / epoch_s / per_segment)
        return (
            f"run it as {segments} resumed segments of ≤ {per_segment} epoch(s) "
            f"(≤ {_hours(wall_cap_s)}) each, checkpointing at the end of each"
        )
    segments = math.ceil(total_s / wall_cap_s)
    return (
        f"one epoch ({_hours(epoch_s)}) is longer than the cap: checkpoint by step and run "
        f"{segments} resumed segments of ≤ {_hours(wall_cap_s)} each"
    )


# Runs longer than this are told about `--gpu-idle` (unless they use it).
LONG_RUN_S = 3600.0
GPU_IDLE_SUGGESTION = (
    "none; suggestion: --gpu-idle 20m stops the job (after a final sync) if its GPUs idle that "
    "long, e.g. a hung dataloader"
)


def check_eta(
    *,
    epochs: float | None,
    seconds_per_epoch: float | None,
    now: datetime,
    zone: ZoneInfo | None = None,
    quiet_windows: Sequence[QuietWindow] = (),
    wall_cap_s: float | None = None,
    time_limit_s: float | None = None,
    measure_epoch_s: Callable[[], float | None] | None = None,
    gpu_idle: bool = False,
) -> Finding:
    """Judge the run's expected end; `now` must be aware. `zone` defaults to the system's.
    The run must fit its own time limit (`time_limit_s`, what the wrapper gives the job inside
    the wall cap: the wall cap less the reserve for allocation and uploads and the kill grace);
    without one, the wall cap."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    zone = zone or local_zone()
    if epochs is None or epochs <= 0:
        return _skip("epochs unknown", "pass --epochs (or set epochs/max_epochs in the config)")
    how = "given"
    if seconds_per_epoch is None and measure_epoch_s is not None:
        try:
            seconds_per_epoch, how = measure_epoch_s(), "measured from earlier runs"
        except Exception as exc:  # a broken measurement is "not measured", not a crash
            return _skip(
                f"seconds per epoch could not be measured: {exc}", "pass --seconds-per-epoch"
            )
    if seconds_per_epoch is None or seconds_per_epoch <= 0:
        return _skip(
            "seconds per epoch unknown: no earlier run to measure it from",
            "pass --seconds-per-epoch (time one epoch, or a few hundred steps)",
        )
    total_s = epochs * seconds_per_epoch
    start = now.astimezone(UTC)
    end = start + timedelta(seconds=total_s)
    start_local, end_local = start.astimezone(zone), end.astimezone(zone)
    saw = (
        f"{epochs:g} epochs x {seconds_per_epoch:g} s ({how}) = {_hours(total_s)}: ends "
        f"{format_local(end, zone)}, {_day_word(start_local, end_local)}"
        f"{_clock_change(start_local, end_local)}"
    )
    spans = quiet_intervals(quiet_windows, start=start, end=end, zone=zone)
    details = tuple(
        f"[quiet] spans {q.window.text!r}: {format_local(q.start, zone)} → "
        f"{format_local(q.end, zone)}"
        for q in spans
    )
    limit_s = time_limit_s if time_limit_s is not None else wall_cap_s
    if limit_s is not None and total_s > limit_s:
        if time_limit_s is not None:
            cap = f" inside its {_span(wall_cap_s)} wall cap" if wall_cap_s is not None else ""
            saw += (
                f"; exceeds the job's time limit of {_span(limit_s)}{cap} (stopped there: "
                "TIMED_OUT)"
            )
        else:
            saw += (
                f"; exceeds the wall cap of {_hours(limit_s)} (killed at hour {limit_s / 3600:g})"
            )
        return Finding(
            CheckName.ETA,
            Verdict.FAIL,
            saw,
            _wall_cap_advice(total_s, seconds_per_epoch, limit_s),
            details,
        )
    if spans:
        saw += f"; spans {len(spans)} quiet window(s)"
        action = _defer_advice(start, end - start, quiet_windows, zone)
        return Finding(CheckName.ETA, Verdict.WARN, saw, action, details)
    if total_s > LONG_RUN_S and not gpu_idle:
        # A hung dataloader or a deadlock would hold the GPU until the time limit.
        return Finding(CheckName.ETA, Verdict.PASS, saw, GPU_IDLE_SUGGESTION, details)
    return Finding(CheckName.ETA, Verdict.PASS, saw, "none", details)
