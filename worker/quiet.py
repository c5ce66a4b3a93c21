"""Quiet windows: local times a run should not span (night, meetings, away), from settings.

Owns parsing the settings strings (`"22:00-07:00"`, `"Sat 00:00-24:00"`, `"Mon-Fri 12:00-13:00"`,
`"weekends 00:00-24:00"`) and laying the windows out as aware UTC intervals over a span of
time in a given zone, correct across DST changes. Judging a run against them is the
pre-flight's (`producer/preflight/eta.py`). It sits on the worker's floor because the settings
object (`worker/settings.py`) validates the windows it is given, and the worker never imports the
producer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from worker.errors import ConfigError

_DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_FULL_DAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_GROUPS = {"daily": range(7), "weekdays": range(5), "weekends": range(5, 7)}
_WINDOW = re.compile(
    r"^\s*(?:(?P<days>[A-Za-z][A-Za-z,\- ]*?)\s+)?(?P<start>\d{1,2}:\d{2})\s*-\s*"
    r"(?P<end>\d{1,2}:\d{2})\s*$"
)


class QuietWindowError(ConfigError):
    def __init__(self, text: str, problem: str) -> None:
        super().__init__(f"quiet window {text!r}: {problem}")
        self.text = text


@dataclass(frozen=True)
class QuietWindow:
    text: str
    days: frozenset[int]  # weekdays the window starts on, Monday = 0
    start_min: int  # minutes after local midnight
    end_min: int  # 1..1440; at or before start_min means it ends the next day


@dataclass(frozen=True)
class QuietInterval:
    start: datetime  # aware, UTC
    end: datetime
    window: QuietWindow


def _minutes(text: str, raw: str, *, end: bool) -> int:
    hours, minutes = (int(p) for p in raw.split(":"))
    total = hours * 60 + minutes
    if minutes > 59 or total > 1440 or (total == 1440 and not end):
        raise QuietWindowError(text, f"{raw} is not a time of day")
    return total


def _day(text: str, name: str) -> int:
    key = name.strip().lower()
    for names in (_DAY_NAMES, _FULL_DAY_NAMES):
        if key in names:
            return names.index(key)
    raise QuietWindowError(text, f"{name!r} is not a weekday (Mon … Sun)")


def _days(text: str, spec: str | None) -> frozenset[int]:
    if spec is None:
        return frozenset(range(7))
    days: set[int] = set()
    for item in spec.split(","):
        item = item.strip().lower()
        if item in _GROUPS:
            days.update(_GROUPS[item])
        elif "-" in item:
            first, last = (_day(text, p) for p in item.split("-", 1))
            days.update((first + i) % 7 for i in range((last - first) % 7 + 1))
        else:
            days.add(_day(text, item))
    return frozenset(days)


def parse_quiet_window(text: str) -> QuietWindow:
    match = _WINDOW.match(text)
    if match is None:
        raise QuietWindowError(text, "expected '[DAYS ]HH:MM-HH:MM', e.g. 'Sat 00:00-24:00'")
    start = _minutes(text, match.group("start"), end=False)
    end = _minutes(text, match.group("end"), end=True)
    if start == end:
        raise QuietWindowError(text, "starts and ends at the same time")
    return QuietWindow(text.strip(), _days(text, match.group("days")), start, end)


def parse_quiet_windows(texts: Iterable[str]) -> tuple[QuietWindow, ...]:
    return tuple(parse_quiet_window(t) for t in texts)


def _at(day: date, minute: int, zone: ZoneInfo) -> datetime:
    # Wall-clock time in the zone, then UTC; zoneinfo resolves a time skipped by DST forward.
    local = datetime.combine(
        day + timedelta(days=minute // 1440), time(minute % 1440 // 60, minute % 60), tzinfo=zone
    )
    return local.astimezone(UTC)


def quiet_intervals(
    windows: Iterable[QuietWindow], *, start: datetime, end: datetime, zone: ZoneInfo
) -> tuple[QuietInterval, ...]:
    """Every window occurrence overlapping [start, end), as UTC intervals, earliest first."""
    first = start.astimezone(zone).date() - timedelta(days=1)
    last = end.astimezone(zone).date()
    found: list[QuietInterval] = []
    for window in windows:
        day = first
        while day <= last:
            if day.weekday() in window.days:
                close = window.end_min + (1440 if window.end_min <= window.start_min else 0)
                begins, ends = _at(day, window.start_min, zone), _at(day, close, zone)
                if begins < end and ends > start:
                    found.append(QuietInterval(begins, ends, window))
            day += timedelta(days=1)
    return tuple(sorted(found, key=lambda q: (q.start, q.end)))
