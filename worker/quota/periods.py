"""The periods of the compute-unit quotas: the day, the week (ISO: Monday to Sunday) and the
month that hold an instant, in the deployment's time zone (`Settings.quota_timezone`, an IANA
name, UTC by default). Each starts and ends at local midnight, so a day across a daylight-saving
change is 23 or 25 hours long. Every host that claims or ends jobs must use the same zone (as it
uses the same key prefix): a period's id names its sums in Redis. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

PERIODS = ("day", "week", "month")


@dataclass(frozen=True)
class Period:
    name: str  # one of PERIODS
    period_id: str  # 2026-05-01, 2026-W18, 2026-05
    start_at: float
    end_at: float
    end_text: str  # its end as people read it: "2026-05-02 00:00 UTC"


def zone(name: str) -> ZoneInfo:
    """The time zone `name` (IANA, e.g. Europe/Paris); ValueError (one line) if unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"{name!r} is not a time zone: write an IANA name such as UTC or Europe/Paris"
        ) from None


def _midnight(day: date, tz: ZoneInfo) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=tz)


def periods_at(now: float, tz_name: str) -> tuple[Period, Period, Period]:
    """The day, week and month that hold `now` (epoch s) in `tz_name`."""
    tz = zone(tz_name)
    today = datetime.fromtimestamp(now, tz).date()
    monday = today - timedelta(days=today.weekday())
    first = today.replace(day=1)
    following = (first + timedelta(days=32)).replace(day=1)
    year, week, _ = today.isocalendar()
    spans = (
        ("day", today.isoformat(), today, today + timedelta(days=1)),
        ("week", f"{year}-W{week:02d}", monday, monday + timedelta(days=7)),
        ("month", first.strftime("%Y-%m"), first, following),
    )
    out = []
    for name, pid, start, end in spans:
        end_dt = _midnight(end, tz)
        text = f"{end_dt:%Y-%m-%d %H:%M} {tz_name}"
        out.append(Period(name, pid, _midnight(start, tz).timestamp(), end_dt.timestamp(), text))
    return out[0], out[1], out[2]
