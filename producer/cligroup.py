"""The `colabq` command group: a usage error (an unknown option, a missing argument, a value of
the wrong type) is one line on stderr that says where to look, not Typer's framed box.

Typer's framed error is several lines on stderr; every colabq error is one line (`colabq: ...`)
with the exit code of bad input (2). Everything else is Typer's own `TyperGroup`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from typer._click.exceptions import ClickException  # Typer vendors click as typer._click
from typer.core import TyperGroup
from typer.exceptions import Abort


class OneLineErrors(TyperGroup):
    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except ClickException as exc:
            ctx = getattr(exc, "ctx", None)
            where = ctx.command_path if ctx is not None else "colabq"
            message = exc.format_message().rstrip(".")
            sys.stderr.write(f"colabq: {message}. See `{where} --help`.\n")
            sys.exit(exc.exit_code)
        except Abort:
            sys.stderr.write("colabq: aborted.\n")
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)
