"""`colabq <command> --help` as a newcomer reads it: every option and argument of every command
(and of the group) says what it does, and a flag shows no type (`<bool>`): it takes no value.

Each command is built from `producer.cli.COMMANDS`, as `colabq` builds it when it is named, and
its help is rendered through Typer's `CliRunner`.
"""

from __future__ import annotations

from typing import Annotated

import pytest
import typer
import typer.main
from typer._click import Command, Context
from typer.testing import CliRunner

from producer.cli import COMMANDS, app
from producer.cligroup import PlainValuesCommand

runner = CliRunner()
WIDE = {"COLUMNS": "200"}


def help_problems(cmd: Command, ctx: Context, rendered: str) -> list[str]:
    """What a reader of `rendered` (the command's --help) would stumble on: a parameter with no
    help text, or a flag shown with a type."""
    found = [
        f"{'/'.join(p.opts)} has no help text"
        for p in cmd.get_params(ctx)
        if not (getattr(p, "help", None) or "").strip()
    ]
    found += [f"a flag's row shows <bool>: {line.strip()}" for line in rendered.splitlines()
              if "<bool>" in line]  # fmt: skip
    return found


def render(argv: list[str]) -> str:
    result = runner.invoke(app, [*argv, "--help"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "--help" in result.stdout  # the options were rendered
    return result.stdout


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_option_of_every_command_has_help_and_no_flag_shows_bool(name: str) -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    cmd = group.commands[name]
    ctx = Context(cmd, info_name=name, parent=Context(group, info_name="colabq"))
    assert help_problems(cmd, ctx, render([name])) == []


def test_the_groups_own_options_have_help_and_no_flag_shows_bool() -> None:
    group = typer.main.get_command(app)
    rendered = render([])
    assert "--version" in rendered
    assert help_problems(group, Context(group, info_name="colabq"), rendered) == []


def test_a_value_option_still_shows_its_type() -> None:
    rendered = render(["status"])
    row = next(line for line in rendered.splitlines() if "--limit" in line)
    assert "<int>" in row
    mine = next(line for line in rendered.splitlines() if "--mine" in line)
    assert "<" not in mine


def test_the_check_reports_an_option_without_help_and_a_typed_flag() -> None:
    def bare(
        verbose: Annotated[bool, typer.Option("--verbose")] = False,
        level: Annotated[int, typer.Option(help="How loud.")] = 1,
    ) -> None:
        """A command written carelessly."""

    plain = typer.Typer()
    plain.command()(bare)  # Typer's own command class: its flags show <bool>
    cmd = typer.main.get_command(plain)
    result = CliRunner().invoke(plain, ["--help"], env=WIDE)
    problems = help_problems(cmd, Context(cmd, info_name="bare"), result.stdout)
    assert any("--verbose has no help text" in p for p in problems), problems
    assert any("<bool>" in p and "--verbose" in p for p in problems), problems
    assert not any("--level" in p for p in problems), problems

    ours = typer.Typer()
    ours.command(cls=PlainValuesCommand)(bare)  # colabq's command class: no <bool>
    result = CliRunner().invoke(ours, ["--help"], env=WIDE)
    cmd = typer.main.get_command(ours)
    problems = help_problems(cmd, Context(cmd, info_name="bare"), result.stdout)
    assert problems == ["--verbose has no help text"]
