"""`colabq usage [--since 7d] [--json]`: each Colab account's balance (as a host of the account
last saw it, with its age), its burn rate over the period, and the compute units by job and by
user (`producer.usage`). Reads the ledger only: no Colab call.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Annotated

import typer

from producer.clictx import JsonOpt, _connect, load_settings, out

if TYPE_CHECKING:
    from rich.console import RenderableType

    from producer.usage import UsageReport

SinceOpt = Annotated[
    str,
    typer.Option("--since", help="The period: the jobs submitted since then (7d, 12h, or a date)."),
]


def usage(since: SinceOpt = "7d", as_json: JsonOpt = False) -> None:
    """Each Colab account's balance and burn rate, and compute units by job and by user.

    The balance is the last `colab usage` a worker (or janitor) of the account recorded, with
    its age; the burn rate is its jobs' compute units per hour of the period; a job's units are
    its GPU's rate times the time it held the GPU (its report's `compute_units`).
    """
    from producer.joblist import parse_since, read_rows
    from producer.usage import build_usage
    from worker.accounts.balances import read_balances

    ledger = _connect(load_settings())
    now = time.time()
    start = parse_since(since, now)
    r, keys = ledger.r, ledger.keys
    ids = [i.decode() for i in r.zrangebyscore(keys.jobs(), start, "+inf")]
    report = build_usage(read_rows(r, keys, ids), read_balances(r, keys), since=start, now=now)
    if as_json:
        print(json.dumps(report.to_json()))
    else:
        out.print(_tables(report, since))


def _tables(report: UsageReport, since: str) -> RenderableType:
    from rich.console import Group
    from rich.table import Table

    from worker.utils import format_duration_s as age

    accounts = Table(title=f"accounts, jobs submitted in the last {since}", title_justify="left")
    for col in ("account", "balance", "seen", "units", "burn/h", "jobs"):
        accounts.add_column(col, overflow="fold")
    for a in report.accounts:
        b = a.balance
        accounts.add_row(
            a.account, f"{b.balance_units:.2f}" if b else "-",
            f"{age(report.now - b.at)} ago ({b.by})" if b else "never", f"{a.units:.3f}",
            f"{a.burn_per_hour:.3f}", str(a.jobs),
        )  # fmt: skip
    users = Table(title="by user", title_justify="left")
    for col in ("user", "units", "jobs", "accounts"):
        users.add_column(col, overflow="fold")
    for name, t in report.users:
        users.add_row(name, f"{t.units:.3f}", str(t.jobs), ", ".join(sorted(t.accounts)))
    jobs = Table(title="by job", title_justify="left")
    for col in ("job", "run", "user", "account", "gpu", "state", "held", "units"):
        jobs.add_column(col, overflow="fold")
    for j in report.jobs:
        jobs.add_row(j.job_id, j.run, j.user, j.account, j.gpu, j.state.upper(),
                     age(j.held_s), f"{j.units:.3f}")  # fmt: skip
    return Group(accounts, users, jobs)
