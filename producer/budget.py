"""What `colabq budget` reports, computed from what it read (pure): each Colab account's balance
(the last `colab usage` a host of the account recorded, with its age), its burn rate over the
last hour and the last day, and how many hours the balance lasts at each rate; and per user the
same against what is left of the user's tightest unit quota (the units used in the current day,
week and month, as the claim counts them), or no hours left figure when the user has none.

A burn rate is the compute units spent in the window per hour of it: the jobs that ended in it
(as the quotas remembered them, `worker.quota.read.read_endings`) and the running ones (so far).
A job's held time is taken as one stretch ending when it ended (or now, if it runs), and only
the part inside the window counts: a 10-hour job that ended a minute ago adds an hour's worth
to the last hour, not ten.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from worker.accounts.balances import Balance
from worker.quota.check import ScopeUse, units_left
from worker.quota.limits import Quota, Scope
from worker.quota.read import Ending, Live

WINDOWS_S = (3600.0, 86400.0)  # the last hour, the last day


def _inside(units: float, held_s: float, end_at: float, now: float, window_s: float) -> float:
    """The part of `units` spent over [end_at - held_s, end_at] that falls in the window."""
    if units <= 0:
        return 0.0
    if held_s <= 0:
        return units if end_at >= now - window_s else 0.0
    overlap = min(end_at, now) - max(end_at - held_s, now - window_s)
    return units * max(min(overlap / held_s, 1.0), 0.0)


def burn_per_hour(
    endings: Iterable[Ending], live: Iterable[Live], now: float, window_s: float, key: str
) -> dict[str, float]:
    """Units an hour over the last `window_s`, by `key` (user or account)."""
    spent: dict[str, float] = {}
    for e in endings:
        name = getattr(e, key)
        spent[name] = spent.get(name, 0.0) + _inside(e.units, e.held_s, e.at, now, window_s)
    for j in live:
        name = getattr(j, key)
        spent[name] = spent.get(name, 0.0) + _inside(j.units, j.held_s, now, now, window_s)
    return {k: v * 3600.0 / window_s for k, v in spent.items()}


def hours_left(left: float | None, per_hour: float) -> float | None:
    """Hours `left` units last at `per_hour` (None: nothing to count down, or no burn)."""
    if left is None or per_hour <= 0:
        return None
    return max(left, 0.0) / per_hour


@dataclass(frozen=True)
class Row:
    """One account or user: what is left (an account's balance; a user's tightest unit quota,
    None without one), its running jobs, the burn rates and the hours left at each."""

    kind: str
    name: str
    left_units: float | None
    running: int
    burn_1h: float
    burn_24h: float
    balance: Balance | None = None
    used: Mapping[str, float] | None = None  # a user's units this day, week, month

    def to_json(self, now: float) -> dict[str, object]:
        out: dict[str, object] = {
            self.kind: self.name, "running": self.running,
            "burn_per_hour_1h": round(self.burn_1h, 4),
            "burn_per_hour_24h": round(self.burn_24h, 4),
            "hours_left_1h": _round(hours_left(self.left_units, self.burn_1h)),
            "hours_left_24h": _round(hours_left(self.left_units, self.burn_24h)),
        }  # fmt: skip
        if self.kind == "account":
            b = self.balance
            out["balance_units"] = b.balance_units if b else None
            out["balance_age_s"] = round(now - b.at, 1) if b else None
        else:
            out["units_left"] = _round(self.left_units)
            out["used"] = {k: round(v, 4) for k, v in (self.used or {}).items()}
        return out


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


@dataclass(frozen=True)
class Budget:
    now: float
    accounts: tuple[Row, ...]
    users: tuple[Row, ...]

    def to_json(self) -> dict[str, object]:
        return {"now": self.now, "accounts": [a.to_json(self.now) for a in self.accounts],
                "users": [u.to_json(self.now) for u in self.users]}  # fmt: skip


def build_budget(
    balances: Mapping[str, Balance],
    quotas: Mapping[Scope, Quota],
    uses: Mapping[Scope, ScopeUse],
    endings: Sequence[Ending],
    live: Sequence[Live],
    now: float,
) -> Budget:
    """Every account (a balance, a quota, a recent or running job) and every user (a quota, a
    recent or running job), by name."""
    burns = {(key, w): burn_per_hour(endings, live, now, w, key)
             for key in ("user", "account") for w in WINDOWS_S}  # fmt: skip
    names = {
        "account": set(balances) | {e.account for e in endings} | {j.account for j in live},
        "user": {e.user for e in endings} | {j.user for j in live},
    }
    for s in [*quotas, *uses]:
        names[s.kind].add(s.name)
    rows: dict[str, list[Row]] = {"account": [], "user": []}
    for kind in ("account", "user"):
        for name in sorted(n for n in names[kind] if n):
            scope = Scope(kind, name)
            use = uses.get(scope, ScopeUse())
            running = use.running if scope in uses else sum(getattr(j, kind) == name for j in live)
            b = balances.get(name) if kind == "account" else None
            left = (b.balance_units if b else None) if kind == "account" else None
            if kind == "user" and scope in quotas:
                left = units_left(quotas[scope], use)
            used = {p: use.used(p) for p in ("day", "week", "month")} if kind == "user" else None
            rows[kind].append(Row(
                kind, name, left, running, burns[(kind, WINDOWS_S[0])].get(name, 0.0),
                burns[(kind, WINDOWS_S[1])].get(name, 0.0), b, used,
            ))  # fmt: skip
    return Budget(now, tuple(rows["account"]), tuple(rows["user"]))
