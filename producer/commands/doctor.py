"""`colabq doctor`: is this machine set up to submit and run jobs? The checks, their rows and
the verdict are `producer/doctor.py`'s; this prints them and exits 0 (no FAIL) or 1.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from producer import exitcodes
from producer.clictx import load_settings, out
from producer.doctor import DEFAULT_TIMEOUT_S, Status, diagnose, doctor_table, verdict


def doctor(
    timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds each check may take before it FAILs.")
    ] = DEFAULT_TIMEOUT_S,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help='Print {"ok", "checks": [{"check", "status", "detail", "what_to_do"}]}.'
        ),
    ] = False,
) -> None:
    """Check this host: the colab CLI and its login, Redis, the Hub token, live workers.

    Exits 0 when no check FAILs (WARN rows are allowed), else 1. Every check is bounded by
    --timeout, so doctor never hangs.
    """
    rows = diagnose(load_settings(), timeout)
    ok = all(r.status is not Status.FAIL for r in rows)
    if as_json:
        print(json.dumps({"ok": ok, "checks": [r.to_json() for r in rows]}))
    else:
        out.print(doctor_table(rows))
        out.print(verdict(rows), markup=False, highlight=False)
    raise typer.Exit(exitcodes.OK if ok else exitcodes.FAILED)
