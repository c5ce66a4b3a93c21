"""`colabq janitor`: one janitor pass now (`worker.janitor.run`), reported as a table or JSON;
a dry run by default.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from producer.clictx import JsonOpt, _connect, build_app, load_settings, out

if TYPE_CHECKING:
    from rich.console import RenderableType

    from worker.janitor.run import JanitorReport

# A pass of this account that holds its lock (beat's, a worker's duty) is waited for this long.
WAIT_S = 30.0


def janitor(
    dry_run: Annotated[bool, typer.Option("--dry-run/--act", help="Report only (default).")] = True,
    as_json: JsonOpt = False,
) -> None:
    """One janitor pass now, for this host's Colab account: what it saw, what it did or would
    do, what it left alone and why.

    A dry run reads the ledger only: no Colab or Hub call, no change. A job whose VM is on
    another account is never acted on here: it is settled from what the store proves, or left
    for a janitor of its account (a worker host of that account runs one by itself).
    """
    from worker.janitor.run import janitor_pass
    from worker.janitor.wiring import build_janitor_deps

    settings = load_settings()
    ledger = _connect(settings)
    deps = build_janitor_deps(settings, ledger, send_with=lambda: build_app(settings))
    report = janitor_pass(deps, dry_run=dry_run, wait_s=WAIT_S)
    if as_json:
        print(json.dumps(report.to_json()))
    else:
        out.print(janitor_table(report))


def janitor_table(report: JanitorReport) -> RenderableType:
    """What a janitor pass saw, did (or would do) and left alone, and why."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    if not report.ran:
        return Text(f"{report.skipped[0].upper()}{report.skipped[1:]}; nothing done.")
    mode = "dry run: nothing changed, no remote call" if report.dry_run else "acted"
    account = "" if report.account_measured else "; the account was not listed"
    of = f" of {report.account}" if report.account else ""
    table = Table(title=f"janitor{of} ({mode}{account})", title_justify="left")
    for col in ("kind", "subject", "seen", "did", "why"):
        table.add_column(col, overflow="fold")
    for r in report.rows:
        table.add_row(r.kind, r.subject, r.seen, r.did, r.why)
    if not report.rows:
        return Group(table, Text("Nothing to reconcile."))
    return table
