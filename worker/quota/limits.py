"""The quotas an operator sets, per user and per Colab account: the most GPUs running at once
(`gpus`) and the compute units a day, week and month (`units_day`, `units_week`,
`units_month`). They live in one Redis hash (`Keys.quota_limits`, fields `<kind>|<name>|<limit>`)
that only operators and services may write; every value read back is checked here (a damaged
one is reported, and the claim keeps the scope's jobs waiting rather than guess).

Who a job's user is (`job_quota_user`): its owner under Redis ACLs (the name in its id, which
Redis authenticated), else the OS user its submitter recorded (`alice@laptop` is `alice`). The
claim script derives it the same way in Lua (`worker.quota.claim`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from worker.people.owners import owner_of
from worker.records.keys import Keys

KINDS = ("user", "account")
LIMITS = ("gpus", "units_day", "units_week", "units_month")
SEP = "|"
# A quota user: an ACL user name, or an OS user's (which may hold capitals and dots).
_USER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def user_name(text: str) -> str:
    """`text` as a quota's user name; ValueError (one line) when it cannot be one."""
    if not _USER.fullmatch(text):
        raise ValueError(
            f"{text!r} is not a user name: letters, digits, '.', '_' and '-' (at most 64), "
            "starting with a letter or digit: a job's user is its Redis ACL user, else its "
            "submitter's OS user"
        )
    return text


def job_quota_user(job_id: str, submitted_by: str | None) -> str:
    """Whose quota a job counts against ('' for nobody's: a name that cannot be one)."""
    name = owner_of(job_id) or (submitted_by or "").partition("@")[0]
    return name if _USER.fullmatch(name) else ""


@dataclass(frozen=True, order=True)
class Scope:
    kind: str  # user | account
    name: str

    @property
    def label(self) -> str:
        """How a waiting job's reason names it: `alice`, `account team@example.com`."""
        return self.name if self.kind == "user" else f"account {self.name}"

    def field(self, limit: str) -> str:
        return SEP.join((self.kind, self.name, limit))


@dataclass(frozen=True)
class Quota:
    scope: Scope
    limits: Mapping[str, float] = field(default_factory=dict)  # limit -> value (gpus whole)
    damaged: Mapping[str, str] = field(default_factory=dict)  # limit -> the text read

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"kind": self.scope.kind, "name": self.scope.name}
        for limit in LIMITS:
            value = self.limits.get(limit)
            out[limit] = int(value) if limit == "gpus" and value is not None else value
        if self.damaged:
            out["damaged"] = dict(self.damaged)
        return out


def check_value(limit: str, value: float) -> float:
    """A limit's value as stored: finite, not negative, and whole for `gpus`; ValueError."""
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"--{limit.replace('_', '-')} {value}: give a number >= 0")
    if limit == "gpus" and value != int(value):
        raise ValueError(f"--gpus {value}: give a whole number of GPUs")
    return float(value)


def _text(raw: Any) -> str:
    return raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)


def parse_quotas(raw_hash: Mapping[Any, Any]) -> dict[Scope, Quota]:
    """The limits hash as read (`HGETALL`), by scope; a field that names no scope and limit is
    skipped, a value that is not a limit's is kept as damaged."""
    limits: dict[Scope, dict[str, float]] = {}
    damaged: dict[Scope, dict[str, str]] = {}
    for raw_field, raw_value in raw_hash.items():
        parts = _text(raw_field).split(SEP)
        if len(parts) != 3 or parts[0] not in KINDS or parts[2] not in LIMITS or not parts[1]:
            continue
        scope, limit, text = Scope(parts[0], parts[1]), parts[2], _text(raw_value)
        try:
            limits.setdefault(scope, {})[limit] = check_value(limit, float(text))
        except ValueError:
            damaged.setdefault(scope, {})[limit] = text[:40]
    return {
        s: Quota(s, limits.get(s, {}), damaged.get(s, {}))
        for s in sorted(set(limits) | set(damaged))
    }


def read_quotas(r: Any, keys: Keys) -> dict[Scope, Quota]:
    return parse_quotas(r.hgetall(keys.quota_limits()))


def set_quota(r: Any, keys: Keys, scope: Scope, values: Mapping[str, float], now: float) -> None:
    """Set some of `scope`'s limits (checked) and make its waiting jobs due (an operator's)."""
    mapping = {scope.field(k): repr(check_value(k, v)) for k, v in values.items()}
    pipe = r.pipeline(transaction=True)
    pipe.hset(keys.quota_limits(), mapping=mapping)
    _make_due(pipe, keys, scope, now)
    pipe.execute()


def clear_quota(
    r: Any, keys: Keys, scope: Scope, now: float, limits: Iterable[str] = LIMITS
) -> None:
    """Clear some (default: all) of `scope`'s limits and make its waiting jobs due."""
    pipe = r.pipeline(transaction=True)
    pipe.hdel(keys.quota_limits(), *(scope.field(k) for k in limits))
    _make_due(pipe, keys, scope, now)
    pipe.execute()


# KEYS: the scope's waiting queue, deferred. ARGV: the job keys' prefix, now. Every waiting job
# still QUEUED and unowned is due now (the next prober tick sends it; the claim decides again).
_MAKE_DUE = """
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local k = ARGV[1] .. id
  if redis.call('HGET', k, 'state') == 'queued' and (redis.call('HGET', k, 'owner') or '') == ''
  then
    redis.call('HSET', k, 'retry_at', ARGV[2])
    redis.call('ZADD', KEYS[2], ARGV[2], id)
  end
end
redis.call('DEL', KEYS[1])
return 1
"""


def _make_due(pipe: Any, keys: Keys, scope: Scope, now: float) -> None:
    waiting = keys.quota_waiting(scope.kind, scope.name)
    pipe.eval(_MAKE_DUE, 2, waiting, keys.deferred(), keys.job(""), repr(now))
