"""`colabq janitor`: one janitor pass now (`worker.janitor.run`), reported as a table or JSON;
a dry run by default.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from producer.clictx import JsonOpt, _connect, build_app, load_settings, out


def janitor(
    dry_run: Annotated[bool, typer.Option("--dry-run/--act", help="Report only (default).")] = True,
    as_json: JsonOpt = False,
) -> None:
    """One janitor pass now: what it saw, what it did or would do, what it left alone and why.

    A dry run reads the ledger only: no Colab or Hub call, no change.
    """
    from producer import render
    from worker.janitor.run import janitor_pass
    from worker.janitor.wiring import build_janitor_deps

    settings = load_settings()
    ledger = _connect(settings)
    deps = build_janitor_deps(settings, ledger, send_with=lambda: build_app(settings))
    report = janitor_pass(deps, dry_run=dry_run)
    if as_json:
        print(json.dumps(report.to_json()))
    else:
        out.print(render.janitor_table(report))
