"""`colabq usage [--since 7d] [--by user|account|gpu|day] [--json]`: each Colab account's
balance (as a host of the account last saw it, with its age), its burn rate over the period, and
the compute units by job and by user; with `--by`, one row per group (jobs, GPU hours held,
compute units) and their total (`producer.usage`). A job's figures are its final report's (a
running job's: so far, as `colabq status` shows them). Reads the ledger only: no Colab call.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from producer.clictx import JsonOpt, _connect, load_settings, out
from worker.errors import UserInputError

if TYPE_CHECKING:
    from rich.console import RenderableType

    from producer.joblist import JobRow
    from producer.usage import UsageReport
    from worker.records.keys import Keys

SinceOpt = Annotated[
    str,
    typer.Option("--since", help="The period: the jobs submitted since then (7d, 12h, or a date)."),
]
ByOpt = Annotated[
    str | None,
    typer.Option(
        "--by",
        help="One row per user, account, gpu or day (submitted, local date): jobs, GPU hours "
        "held, compute units, and the total.",
    ),
]


def usage(since: SinceOpt = "7d", by: ByOpt = None, as_json: JsonOpt = False) -> None:
    """Each Colab account's balance and burn rate, and compute units by job and by user.

    The balance is the last `colab usage` a worker (or janitor) of the account recorded, with
    its age; the burn rate is its jobs' compute units per hour of the period; a job's units are
    its GPU's rate times the time it held the GPU (its report's `compute_units`). With
    `--by`: one row per group, with its jobs, GPU hours held and compute units, and the total.
    """
    from producer.joblist import parse_since, read_rows
    from producer.usage import BY, build_usage
    from worker.accounts.balances import read_balances
    from worker.records.ids import members

    by = by.lower() if by is not None else None
    if by is not None and by not in BY:
        raise UserInputError(f"--by {by!r}: use one of {', '.join(BY)}.")
    now = time.time()
    start = parse_since(since, now)
    ledger = _connect(load_settings())
    r, keys = ledger.r, ledger.keys
    rows = read_rows(r, keys, members("job id", r.zrangebyscore(keys.jobs(), start, "+inf"),
                                      keys.jobs()))  # fmt: skip
    report = build_usage(
        rows, read_balances(r, keys), since=start, now=now, reports=_reports(r, keys, rows)
    )
    if by is not None:
        _grouped(report, by, since, as_json)
    elif as_json:
        print(json.dumps(report.to_json()))
    else:
        out.print(_tables(report, since))


def _reports(r: Any, keys: Keys, rows: list[JobRow]) -> dict[str, dict[str, Any]]:
    """The final reports of the ended jobs among `rows` (one that cannot be read is left out:
    its record's figures are used)."""
    from worker.states import TERMINAL

    ended = [row.job_id for row in rows if row.state in TERMINAL]
    pipe = r.pipeline(transaction=False)
    for job_id in ended:
        pipe.hget(keys.job(job_id), "report")
    got: dict[str, dict[str, Any]] = {}
    for job_id, raw in zip(ended, pipe.execute(raise_on_error=False), strict=True):
        if isinstance(raw, bytes):
            try:
                parsed = json.loads(raw)
            except ValueError:
                continue
            if isinstance(parsed, dict):
                got[job_id] = parsed
    return got


def _grouped(report: UsageReport, by: str, since: str, as_json: bool) -> None:
    from rich.table import Table

    from producer.usage import LIVE, group_usage

    groups, total = group_usage(report.jobs, by)
    if as_json:
        print(json.dumps({
            "since": report.since, "now": report.now, "by": by,
            "groups": [g.to_json(by) for g in groups], "total": total.to_json(by),
            "jobs": [{"job_id": j.job_id, by: j.key(by), "state": j.state, "source": j.source,
                      "held_s": j.held_s, "units": j.units} for j in report.jobs],
        }))  # fmt: skip
        return
    table = Table(title=f"usage by {by}, jobs submitted in the last {since}", title_justify="left")
    for col in (by, "jobs", "GPU hours", "units"):
        table.add_column(col, overflow="fold", justify="left" if col == by else "right")

    def row(g: Any) -> tuple[str, ...]:
        jobs = f"{g.jobs} ({g.live} running)" if g.live else str(g.jobs)
        return g.key, jobs, f"{g.held_s / 3600:.2f}", f"{g.units:.2f}"

    for g in groups:
        table.add_row(*row(g))
    table.add_section()
    table.add_row(*row(total))
    out.print(table)
    live = sum(j.source == LIVE for j in report.jobs)
    note = "GPU hours and units: each ended job's final report"
    if live:
        note += f"; {live} job(s) still running: so far, as `colabq status` shows them"
    out.print(note)


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
