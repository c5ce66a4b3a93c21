"""The one grammar of the names colabq reads back: job ids, sweep ids, user names, session names,
endpoints, worker names. The bottom floor: it imports nothing of colabq.

Every such value read from Redis (records, indexes, events), a message (task arguments) or a spec
is checked here where it enters, strictly in charset and length: what fails is reported (one log
line naming where it was read, `report`) and skipped, and so never becomes a file path, a command
argument or a Redis key. Each grammar also makes a value safe as one path component (no `/`, no
NUL, never `.` or `..`, at most 256 bytes) and as one word of a key name (no `:`; a job id has no
`*`). Callers raise `worker.errors.UntrustedValue` where a bad value must stop what they do.

The Lua twins (`LUA_NAMES`) check the same grammars inside the ledger's scripts, which read ids
from sets and fields and build keys from them (a test holds the two equal).
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable

log = logging.getLogger(__name__)

# A colabq user name (the Redis ACL user): it ends owned job ids, so no '.'.
USER = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
# 16 hex digits today (`owners.new_job_id`), 8 to 40 [a-z0-9] accepted; `.<user>` under ACLs.
JOB_ID = re.compile(rf"[a-z0-9]{{8,40}}(?:\.{USER.pattern})?")
# `sw` and 12 hex digits (`flow.sweeps.new_sweep_id`), `.<user>` under ACLs.
SWEEP_ID = re.compile(rf"sw[0-9a-f]{{12}}(?:\.{USER.pattern})?")
# A name the `colab` CLI takes: a file name (history/<name>.jsonl) that never parses as an option.
SESSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
# colabq's own sessions: its prefix (a setting of letters, digits, '-' and '_') and 128 random
# bits (`session.job.session_name`).
OWNED_SESSION_SUFFIX = re.compile(r"[0-9a-f]{32}")
# What the backend returns for an assignment (the spec says: whatever it returns; it goes into
# the URL `/tun/m/unassign/<endpoint>`): strict in charset and length, not in shape.
ENDPOINT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._~-]{0,199}")
# A Celery worker's name (`-n name@host`).
WORKER = re.compile(r"[A-Za-z0-9][A-Za-z0-9@._+-]{0,199}")

_GRAMMARS = {
    "job id": JOB_ID,
    "sweep id": SWEEP_ID,
    "user": USER,
    "session": SESSION,
    "endpoint": ENDPOINT,
    "worker": WORKER,
}

# How many distinct bad values `report` remembers, so that one planted value read every pass is
# logged once, not every minute for ever (a bounded memory: the oldest are forgotten).
_REPORTED_MAX = 1024
_reported: OrderedDict[tuple[str, str], None] = OrderedDict()
_reported_lock = threading.Lock()


def text(raw: object) -> str | None:
    """`raw` as text: a str as is, bytes only if they are UTF-8; anything else None."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, bytes):
        try:
            return raw.decode()
        except UnicodeDecodeError:
            return None
    return None


def _valid(kind: str, raw: object) -> str | None:
    value = text(raw)
    if value is None or not _GRAMMARS[kind].fullmatch(value):
        return None
    return value


def job_id(raw: object) -> str | None:
    """`raw` if it is a job id (bytes or str), else None."""
    return _valid("job id", raw)


def sweep_id(raw: object) -> str | None:
    return _valid("sweep id", raw)


def user(raw: object) -> str | None:
    return _valid("user", raw)


def session(raw: object) -> str | None:
    """A session name the CLI may be given (anyone's)."""
    return _valid("session", raw)


def owned_session(raw: object, prefix: str) -> str | None:
    """`raw` if it is one of colabq's session names under `prefix`, else None."""
    value = session(raw)
    if value is None or not prefix or not value.startswith(prefix):
        return None
    return value if OWNED_SESSION_SUFFIX.fullmatch(value[len(prefix) :]) else None


def endpoint(raw: object) -> str | None:
    return _valid("endpoint", raw)


def worker(raw: object) -> str | None:
    return _valid("worker", raw)


def owner_of(job: str) -> str | None:
    """The user an owned job id (or sweep id) ends in; None for a plain one."""
    _, sep, owner = job.partition(".")
    return owner if sep else None


def shown(raw: object, most: int = 60) -> str:
    """`raw` fit for one log or report line: its repr, cut to `most` characters."""
    r = repr(raw)
    return r if len(r) <= most else f"{r[: most - 3]}..."


def report(kind: str, where: str, raw: object) -> None:
    """Say once (per process, for the last `_REPORTED_MAX` distinct values) that `where` (a key
    name, a field, a task argument) held `raw`, which is no `kind`: it was skipped."""
    mark = (where, shown(raw))
    with _reported_lock:  # a worker's threads (prober, card, metrics follower) report too
        if mark in _reported:
            return
        _reported[mark] = None
        if len(_reported) > _REPORTED_MAX:
            _reported.popitem(last=False)
    log.warning("skipped %s in %s: not a %s", shown(raw), where, kind)


def members(kind: str, raws: Iterable[object], where: str) -> list[str]:
    """The valid `kind` values among `raws` (an index's members), in order; each bad one
    reported and skipped."""
    out = []
    for raw in raws:
        value = _valid(kind, raw)
        if value is None:
            report(kind, where, raw)
        else:
            out.append(value)
    return out


def component_problem(name: str) -> str | None:
    """Why `name` cannot be one path component under a folder of colabq's, or None."""
    if not name or name in (".", "..") or "/" in name or "\x00" in name or "\\" in name:
        return f"{shown(name)} is not one path component"
    if len(name.encode()) > 255:
        return f"{shown(name)} is over 255 bytes"
    return None


# Lua (Redis 5.1's patterns): `is_job_id(s)` and `is_sweep_id(s, job)` (a sweep a job may count
# against: a plain sweep for a plain job, an owned one only for a job of the same owner), the
# grammars above.
LUA_NAMES = """
local function is_user(s)
  return #s >= 1 and #s <= 32 and string.match(s, '^[a-z0-9][a-z0-9_%-]*$') ~= nil
end
local function is_job_id(s)
  if type(s) ~= 'string' then return false end
  local base, owner = string.match(s, '^([a-z0-9]+)%.(.+)$')
  if not base then base, owner = string.match(s, '^([a-z0-9]+)$'), nil end
  if not base or #base < 8 or #base > 40 then return false end
  return owner == nil or is_user(owner)
end
local function is_sweep_id(s, job)
  if type(s) ~= 'string' then return false end
  local hex, owner = string.match(s, '^sw([0-9a-f]+)%.(.+)$')
  if not hex then hex, owner = string.match(s, '^sw([0-9a-f]+)$'), nil end
  if not hex or #hex ~= 12 or (owner ~= nil and not is_user(owner)) then return false end
  local job_owner = string.match(job, '%.(.+)$')
  return owner == job_owner
end
"""
