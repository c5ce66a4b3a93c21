"""Small pure helpers with no home of their own."""

from __future__ import annotations

import re

_DURATION = re.compile(
    r"^(?:(?P<h>\d+(?:\.\d+)?)h)?(?:(?P<m>\d+(?:\.\d+)?)m)?(?:(?P<s>\d+(?:\.\d+)?)s)?$"
)


def parse_duration_s(text: str) -> float:
    """'90', '90s', '15m', '4h', '1h30m' -> seconds. Raises ValueError on anything else."""
    t = text.strip().lower()
    if not t:
        raise ValueError("empty duration")
    try:
        value = float(t)
    except ValueError:
        m = _DURATION.fullmatch(t)
        if not m or not any(m.groupdict().values()):
            raise ValueError(f"{text!r} is not a duration like 90s, 15m, 4h or 1h30m") from None
        value = sum(float(m[k] or 0) * f for k, f in (("h", 3600), ("m", 60), ("s", 1)))
    if value <= 0:
        raise ValueError(f"{text!r} must be positive")
    return value


def format_duration_s(seconds: float) -> str:
    s = round(seconds)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h}h{m:02d}m"
    if m:
        return f"{m}m{sec:02d}s"
    return f"{sec}s"
