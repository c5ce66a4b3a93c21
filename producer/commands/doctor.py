"""`colabq doctor`: is this machine set up to submit and run jobs? The checks, their rows and
the verdict are `producer/doctor.py`'s; this prints them and exits 0 (no FAIL), 1, or 2 (a `colab`
release colabq does not drive: a worker refuses to start on it too).
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
    """Check this host: the colab CLI (its release, its exec path) and its login, Redis, the Hub
    token, live workers.

    Exits 0 when no check FAILs (WARN rows are allowed), 2 when the colab CLI is a release
    colabq does not drive, else 1. Every check is bounded by --timeout, so doctor never hangs.
    """
    rows = diagnose(load_settings(), timeout)
    ok = all(r.status is not Status.FAIL for r in rows)
    code = exitcodes.OK if ok else exitcodes.FAILED
    if any(r.refuses for r in rows):
        code = exitcodes.BAD_INPUT
    if as_json:
        print(json.dumps({"ok": ok, "checks": [r.to_json() for r in rows]}))
    else:
        out.print(doctor_table(rows))
        out.print(verdict(rows), markup=False, highlight=False)
    raise typer.Exit(code)
