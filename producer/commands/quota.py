"""`colabq quota [show|set|clear] [--user NAME | --account EMAIL] [--gpus N] [--units-day U]
[--units-week U] [--units-month U] [--json]`: the quotas per user and per Colab account
(`worker.quota`). `show` (the default) lists each quota with what it counts now (running jobs,
units used this day, week and month, jobs waiting) and whether a new job would start or wait,
and why; with `--user` or `--account`, that one scope, quota or not. `set` and `clear` are an
operator's (`worker.people.guard`; Redis refuses a user's write anyway): they change the limits
named (clear: all of them, or the `--limit`s named) and make the scope's waiting jobs due.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from producer.clictx import JsonOpt, _connect, load_settings, out
from worker.errors import UserInputError

if TYPE_CHECKING:
    from worker.quota.limits import Scope

ActionArg = Annotated[
    str, typer.Argument(help="show (the default), set (an operator's) or clear (an operator's).")
]
UserOpt = Annotated[
    str | None,
    typer.Option(
        "--user", help="The user: a Redis ACL user, else an OS user (alice of alice@laptop)."
    ),
]
AccountOpt = Annotated[
    str | None, typer.Option("--account", help="The Colab account (its login's email).")
]
GpusOpt = Annotated[int | None, typer.Option("--gpus", help="At most this many running at once.")]
DayOpt = Annotated[
    float | None, typer.Option("--units-day", help="Compute units a day (started jobs only).")
]
WeekOpt = Annotated[float | None, typer.Option("--units-week", help="Compute units a week.")]
MonthOpt = Annotated[float | None, typer.Option("--units-month", help="Compute units a month.")]
LimitOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--limit", help="clear: only this limit (gpus, units-day, units-week, units-month)."
    ),
]
ACTIONS = ("show", "set", "clear")


def _scope(user: str | None, account: str | None, *, needed: bool) -> Scope | None:
    from worker.accounts.names import account_name
    from worker.quota.limits import Scope, user_name

    if user is not None and account is not None:
        raise UserInputError("Name one scope: --user NAME or --account EMAIL, not both.")
    try:
        if user is not None:
            return Scope("user", user_name(user))
        if account is not None:
            name = account_name(account)
            if "|" in name:
                raise ValueError(f"{account!r} holds '|': colabq cannot keep a quota for it")
            return Scope("account", name)
    except ValueError as exc:
        raise UserInputError(f"{exc}.") from None
    if needed:
        raise UserInputError("Name whose quota: --user NAME or --account EMAIL.")
    return None


def quota(
    action: ActionArg = "show",
    user: UserOpt = None,
    account: AccountOpt = None,
    gpus: GpusOpt = None,
    units_day: DayOpt = None,
    units_week: WeekOpt = None,
    units_month: MonthOpt = None,
    limit: LimitOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The quotas per user and per Colab account: the most GPUs running at once and the compute
    units a day, week and month (set and cleared by an operator).

    A job over its user's (or its account's) quota waits in the queue, holding no worker, and
    `colabq status` says which quota and until when; it never fails for it. A unit quota stops
    new starts only: a running job goes on.
    """
    if action not in ACTIONS:
        raise UserInputError(f"colabq quota {action!r}: use one of {', '.join(ACTIONS)}.")
    values = {"gpus": gpus, "units_day": units_day, "units_week": units_week,
              "units_month": units_month}  # fmt: skip
    given = {k: float(v) for k, v in values.items() if v is not None}
    if action != "set" and given:
        raise UserInputError(f"colabq quota {action} takes no limit value: `colabq quota set`.")
    if action != "clear" and limit:
        raise UserInputError("--limit names what `colabq quota clear` clears.")
    scope = _scope(user, account, needed=action != "show")
    settings = load_settings()
    ledger = _connect(settings)
    if action == "show":
        _show(ledger, settings.quota_timezone, scope, as_json)
        return
    assert scope is not None
    _change(ledger, scope, action, given, limit or [], as_json)


def _change(
    ledger: Any, scope: Scope, action: str, given: dict[str, float], limits: list[str],
    as_json: bool,
) -> None:  # fmt: skip
    from worker.people.guard import check_operator
    from worker.quota.limits import LIMITS, clear_quota, read_quotas, set_quota

    now = time.time()
    if action == "set":
        if not given:
            raise UserInputError(
                "Give a limit to set: --gpus N, --units-day U, --units-week U or --units-month U."
            )
        check_operator(ledger, f"Setting the quota of {scope.label}")
        try:
            set_quota(ledger.r, ledger.keys, scope, given, now)
        except ValueError as exc:
            raise UserInputError(f"{exc}.") from None
    else:
        names = [x.replace("-", "_") for x in limits] or list(LIMITS)
        if unknown := [x for x in names if x not in LIMITS]:
            raise UserInputError(f"--limit {unknown[0]}: use gpus, units-day, units-week or "
                                 "units-month.")  # fmt: skip
        check_operator(ledger, f"Clearing the quota of {scope.label}")
        clear_quota(ledger.r, ledger.keys, scope, now, names)
    from worker.quota.limits import Quota

    got = read_quotas(ledger.r, ledger.keys).get(scope, Quota(scope))
    if as_json:
        print(json.dumps(got.to_json()))
        return
    what = ", ".join(f"{k.replace('_', ' ')} {_num(v)}" for k, v in got.limits.items()) or "none"
    out.print(f"Quota of {scope.label}: {what} (its waiting jobs are tried again now).")


def _num(x: float) -> str:
    from worker.quota.check import fmt_units

    return fmt_units(x)


def _show(ledger: Any, tz: str, scope: Scope | None, as_json: bool) -> None:
    from worker.quota.check import find_wait
    from worker.quota.limits import Quota, read_quotas
    from worker.quota.periods import periods_at
    from worker.quota.read import read_use

    now = time.time()
    quotas = read_quotas(ledger.r, ledger.keys)
    if scope is not None:
        quotas = {scope: quotas.get(scope, Quota(scope))}
    periods = periods_at(now, tz)
    uses = read_use(ledger.r, ledger.keys, quotas, periods, now)
    rows = []
    for s, q in quotas.items():
        use, waiting = uses[s]
        wait = find_wait(q, use, periods, now)
        rows.append({
            **q.to_json(), "running": use.running, "waiting": waiting,
            "used": {p.name: round(use.used(p.name), 4) for p in periods},
            "period_ends": {p.name: p.end_text for p in periods},
            "new_job": wait.reason if wait else "starts",
        })  # fmt: skip
    if as_json:
        print(json.dumps({"now": now, "timezone": tz, "quotas": rows}))
    elif not rows:
        out.print("No quota is set (`colabq quota set --user NAME --gpus N` as an operator).")
    else:
        out.print(_table(rows, tz))


def _table(rows: list[dict[str, Any]], tz: str) -> Any:
    from rich.table import Table

    table = Table(title=f"quotas (days, weeks, months in {tz})", title_justify="left")
    for col in ("scope", "gpus", "units day", "units week", "units month", "waiting", "a new job"):
        table.add_column(col, overflow="fold")

    def cell(r: dict[str, Any], limit: str, used: str) -> str:
        cap = r.get(limit)
        return used if cap is None else f"{used} of {_num(float(cap))}"

    for r in rows:
        scope = r["name"] if r["kind"] == "user" else f"account {r['name']}"
        used = r["used"]
        table.add_row(
            scope, cell(r, "gpus", str(r["running"])), cell(r, "units_day", _num(used["day"])),
            cell(r, "units_week", _num(used["week"])), cell(r, "units_month", _num(used["month"])),
            str(r["waiting"]), "damaged: " + ", ".join(r["damaged"]) if r.get("damaged")
            else r["new_job"].removeprefix("waiting: "),
        )  # fmt: skip
    return table
