"""Small pure helpers with no home of their own (none imports more than the standard library
and `worker.errors`: `colabq` reads its ledger settings with these, without pydantic)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import parse_qs, urlsplit

from worker.errors import UserInputError

_DURATION = re.compile(
    r"^(?:(?P<d>\d+(?:\.\d+)?)d)?(?:(?P<h>\d+(?:\.\d+)?)h)?"
    r"(?:(?P<m>\d+(?:\.\d+)?)m)?(?:(?P<s>\d+(?:\.\d+)?)s)?$"
)


MAX_DURATION_S = 30 * 24 * 3600.0


def parse_duration_s(text: str) -> float:
    """'90s', '15m', '4h', '1h30m', '2d' -> seconds. Raises ValueError, saying what is wrong, on
    anything else: a bare number (which unit?), zero, a negative, NaN, infinity, over 30 days."""
    t = text.strip().lower()
    if not t:
        raise ValueError("empty duration: write it like 90s, 15m, 4h or 1h30m")
    if t.startswith("-"):
        raise ValueError(f"{text!r} is negative: a duration is longer than zero")
    try:
        number = float(t)
    except ValueError:
        pass
    else:
        if number != number or number in (float("inf"), float("-inf")):
            raise ValueError(f"{text!r} is not a finite duration")
        raise ValueError(f"{text!r} has no unit: write {t}s, {t}m or {t}h")
    m = _DURATION.fullmatch(t)
    if not m or not any(m.groupdict().values()):
        raise ValueError(f"{text!r} is not a duration like 90s, 15m, 4h or 1h30m")
    units = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
    value = sum(float(m[k] or 0) * f for k, f in units)
    if value <= 0:
        raise ValueError(f"{text!r} must be longer than zero")
    if value > MAX_DURATION_S:
        raise ValueError(f"{text!r} is over 30 days")
    return value


def format_duration_s(seconds: float) -> str:
    """A duration in at most 6 characters: 45s, 12m05s, 3h07m, 2d04h."""
    s = round(seconds)
    d, rem = divmod(s, 86400)
    h, rem = divmod(rem, 3600)
    m, sec = divmod(rem, 60)
    if d:
        return f"{d}d{h:02d}h"
    if h:
        return f"{h}h{m:02d}m"
    return f"{m}m{sec:02d}s" if m else f"{sec}s"


def pairs(option: str, items: Sequence[str], shape: str) -> dict[str, str]:
    """`["a=1", "b=2"]` → `{"a": "1", "b": "2"}`; a malformed or repeated pair is bad input."""
    found: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UserInputError(f"{option} {item!r}: expected {shape}.")
        if key in found:
            raise UserInputError(f"{option} {key} is given twice.")
        found[key] = value
    return found


# Redis keys and queue names: nothing a shell, a path or a glob would read as syntax.
_SAFE_NAME = re.compile(r"[A-Za-z0-9._:-]*")


def key_name_problem(name: str, *, empty_ok: bool) -> str | None:
    """Why `name` cannot start Redis keys or queue names, or None."""
    if not _SAFE_NAME.fullmatch(name):
        return "may hold only letters, digits, '.', '_', '-' and ':'"
    if not name and not empty_ok:
        return "must not be empty"
    return None


def redis_master_name_problem(url: str, name: str | None) -> str | None:
    """Why `name` cannot be `COLABQ_REDIS_MASTER_NAME` with `url`, or None: it names the master
    of a sentinel:// URL (required there), and is not read with any other URL."""
    if not url.lower().startswith("sentinel://"):
        return None
    from worker.records.sentinelurl import master_name_problem

    return master_name_problem(url, name)


def redis_url_problem(url: str) -> str | None:
    """Why `url` is not a Redis URL colabq can use, or None. Parsed as redis-py parses it
    (urllib), but stricter: a port in 1-65535, a database that is a non-negative integer. A
    Sentinel URL is read as `worker.records.sentinelurl` reads it."""
    if url.lower().startswith("sentinel://"):
        from worker.records.sentinelurl import sentinel_url_problem

        return sentinel_url_problem(url)
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return "must start with redis://, rediss://, unix:// or sentinel://"
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return f"the port {parts.netloc.rpartition(':')[2]!r} is not a number in 1-65535"
    if port == 0:
        return "the port must be in 1-65535"
    db_texts = parse_qs(parts.query).get("db", [])
    if parts.scheme == "unix":
        if not parts.path:
            return "unix:// needs the socket's path (unix:///run/redis.sock?db=0)"
    else:
        if not parts.hostname:
            return "names no host (redis://HOST:PORT/DB)"
        if parts.path.strip("/"):
            db_texts.append(parts.path.strip("/"))
    for text in db_texts:
        if not text.isdigit():
            return f"the database {text!r} is not a non-negative integer"
    return None
