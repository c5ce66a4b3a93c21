"""The CLI reference, generated from the commands themselves: `colabq --help` and each
command's `--help`, rendered by Typer as a user sees them (80 columns), in the order
`colabq --help` lists them; and each command's options, for the test that checks the flags the
hand-written pages name.

The commands are `producer.cli`'s Typer app, built into its Click command tree as `colabq`
builds it (each command's module is imported when it is first looked up).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

WIDTH = 80  # a terminal's usual width, and what fits the page


def _group() -> Any:
    import typer.main

    from producer.cli import app

    return typer.main.get_command(app)


def command_paths() -> list[tuple[str, ...]]:
    """Every command's words after `colabq` (a sub-group's commands too), in `--help` order."""
    from typer._click import Context
    from typer.core import TyperGroup

    def walk(cmd: Any, path: tuple[str, ...], ctx: Any) -> Iterator[tuple[str, ...]]:
        if isinstance(cmd, TyperGroup):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is None or getattr(sub, "hidden", False):
                    continue
                yield from walk(sub, (*path, name), Context(sub, info_name=name, parent=ctx))
        if path:
            yield path

    group = _group()
    return list(walk(group, (), Context(group, info_name="colabq")))


def help_text(path: tuple[str, ...]) -> str:
    """`colabq PATH --help` as it prints, without trailing spaces."""
    from typer.testing import CliRunner

    from producer.cli import app

    env = {"COLUMNS": str(WIDTH), "NO_COLOR": "1", "TERM": "dumb"}
    result = CliRunner().invoke(app, [*path, "--help"], env=env)
    if result.exit_code != 0:
        raise RuntimeError(f"colabq {' '.join(path)} --help exited {result.exit_code}")
    return "\n".join(line.rstrip() for line in result.stdout.splitlines()).strip("\n")


def options_of(path: tuple[str, ...]) -> set[str]:
    """Every option string `colabq PATH` accepts (`--json`, `-f`, ...), `--help` included."""
    from typer._click import Context

    group = _group()
    ctx = Context(group, info_name="colabq")
    cmd = group
    for word in path:
        cmd = cmd.get_command(ctx, word)
        if cmd is None:
            raise KeyError(" ".join(path))
        ctx = Context(cmd, info_name=word, parent=ctx)
    found = {"--help"}
    for param in cmd.get_params(ctx):
        found.update(getattr(param, "opts", ()))
        found.update(getattr(param, "secondary_opts", ()))
    return {name for name in found if name.startswith("-")}


def root_options() -> set[str]:
    """The options of `colabq` itself (before a command: `--env-file`, `--version`, ...)."""
    return options_of(())


def render_cli_reference() -> str:
    """The reference as Markdown: one section a command, its help in a text block."""
    parts = ["## colabq\n", "```text", help_text(()), "```\n"]
    for path in command_paths():
        name = " ".join(path)
        parts += [f"## colabq {name}\n", "```text", help_text(path), "```\n"]
    return "\n".join(parts)
