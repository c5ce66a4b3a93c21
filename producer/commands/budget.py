"""`colabq budget [--json]`: each Colab account's balance, its burn rate over the last hour and
the last day, and the hours the balance lasts at each; per user the same against what is left of
the user's unit quotas (`producer.budget`). Reads Redis only (a few pipelined round trips): no
Colab call.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from producer.clictx import JsonOpt, _connect, load_settings, out

if TYPE_CHECKING:
    from rich.console import RenderableType

    from producer.budget import Budget, Row


def budget(as_json: JsonOpt = False) -> None:
    """Each Colab account's balance and burn rate (last hour, last day) and the hours it lasts;
    per user, the same against what is left of their unit quota.

    The balance is the last `colab usage` a worker (or janitor) of the account recorded, with its
    age; a burn rate is the compute units the account's (or user's) jobs spent in the window,
    the running ones' so far included, per hour.
    """
    from producer.budget import build_budget
    from worker.accounts.balances import read_balances
    from worker.quota.limits import Scope, read_quotas
    from worker.quota.periods import periods_at
    from worker.quota.read import read_endings, read_live, read_use

    settings = load_settings()
    ledger = _connect(settings)
    r, keys, now = ledger.r, ledger.keys, time.time()
    quotas = read_quotas(r, keys)
    endings = read_endings(r, keys, now - 86400)
    live = read_live(r, keys, now)
    users = {Scope("user", n) for n in [*(e.user for e in endings), *(j.user for j in live)] if n}
    users |= {s for s in quotas if s.kind == "user"}
    periods = periods_at(now, settings.quota_timezone)
    uses = {s: u for s, (u, _) in read_use(r, keys, sorted(users), periods, now).items()}
    report = build_budget(read_balances(r, keys), quotas, uses, endings, live, now)
    if as_json:
        print(json.dumps(report.to_json()))
    else:
        out.print(_tables(report))


def _hours(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def _tables(report: Budget) -> RenderableType:
    from rich.console import Group
    from rich.table import Table

    from worker.utils import format_duration_s as age

    def rates(row: Row) -> tuple[str, ...]:
        from producer.budget import hours_left

        left = row.left_units
        at_rates = (_hours(hours_left(left, b)) for b in (row.burn_1h, row.burn_24h))
        return (f"{row.burn_1h:.3f}", f"{row.burn_24h:.3f}", *at_rates)

    heads = ("burn/h (1h)", "burn/h (24h)", "hours left (1h rate)", "hours left (24h rate)")
    accounts = Table(title="accounts", title_justify="left")
    for col in ("account", "balance", "seen", "running", *heads):
        accounts.add_column(col, overflow="fold")
    for a in report.accounts:
        b = a.balance
        seen = f"{age(report.now - b.at)} ago" if b else "never"
        accounts.add_row(a.name, f"{b.balance_units:.2f}" if b else "-", seen, str(a.running),
                         *rates(a))  # fmt: skip
    users = Table(title="users (left: of their tightest unit quota)", title_justify="left")
    for col in ("user", "today", "week", "month", "left", "running", *heads):
        users.add_column(col, overflow="fold")
    for u in report.users:
        used = u.used or {}
        users.add_row(
            u.name, *(f"{used.get(p, 0.0):.3f}" for p in ("day", "week", "month")),
            "-" if u.left_units is None else f"{u.left_units:.3f}", str(u.running), *rates(u),
        )  # fmt: skip
    return Group(accounts, users)
