"""`colabq demo`: a demo job end to end (an embedded broker, a worker, the Colab emulator, the
final report); the run itself is `producer/demo.py`'s.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from producer.clictx import err, out


def demo(
    keep: Annotated[bool, typer.Option(help="Keep the demo folder afterwards.")] = False,
    as_json: Annotated[
        bool,
        typer.Option("--json", help='Progress on stderr, then one line: {"result": "passed"}.'),
    ] = False,
) -> None:
    """Run a demo job end to end: broker, worker, Colab emulator, final report."""
    from producer.demo import run_demo

    code = run_demo(err if as_json else out, keep=keep)
    if as_json:
        print(json.dumps({"result": "passed" if code == 0 else "failed"}))
    raise typer.Exit(code)
