"""The `colabq` command group: each command's name, the module in `producer/commands/` that
holds it, and what every command shares (one line for a known error, its exit code).

Exit codes are one table, `producer/exitcodes.py` (the README prints it): a known error exits
with its code, and `status JOB`, `logs -f` and `adopt` with the job's outcome. A known error
prints one line on stderr and never a traceback.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Callable
from typing import Annotated, ParamSpec

import typer

from producer import exitcodes
from producer.clictx import err
from producer.cligroup import OneLineErrors
from worker.errors import ColabqError

# Start-up matters (`colabq status` and `colabq preflight` are typed often): heavy imports
# (celery, redis, pydantic, rich, huggingface_hub) happen inside the commands that need them,
# and each command's module is imported, and its options built, only when that command runs
# (or when `--help` or shell completion lists it).

# Where each command's function lives (`producer/commands/`, one module a command or a family),
# in the order `colabq --help` lists them.
COMMANDS = {
    "preflight": "producer.commands.preflight",
    "submit": "producer.commands.submit",
    "retry": "producer.commands.retry",
    "status": "producer.commands.status",
    "logs": "producer.commands.logs",
    "events": "producer.commands.events",
    "cancel": "producer.commands.cancel",
    "requests": "producer.commands.requests",
    "stage": "producer.commands.stage",
    "clean": "producer.commands.clean",
    "worker": "producer.commands.worker",
    "beat": "producer.commands.worker",
    "notifier": "producer.commands.notifier",
    "gate": "producer.commands.gate",
    "workers": "producer.commands.fleet",
    "drain": "producer.commands.fleet",
    "undrain": "producer.commands.fleet",
    "flower": "producer.commands.flower",
    "metrics": "producer.commands.metrics",
    "doctor": "producer.commands.doctor",
    "usage": "producer.commands.usage",
    "budget": "producer.commands.budget",
    "quota": "producer.commands.quota",
    "janitor": "producer.commands.janitor",
    "adopt": "producer.commands.adopt",
    "acl": "producer.commands.acl",
    "demo": "producer.commands.demo",
}


def _load(name: str) -> Callable[..., None]:
    return command(getattr(importlib.import_module(COMMANDS[name]), name))


class Colabq(OneLineErrors):
    loaders = {name: functools.partial(_load, name) for name in COMMANDS}


app = typer.Typer(
    name="colabq",
    help="Queue long ML training jobs onto Colab GPU sessions; results on the Hugging Face Hub.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    cls=Colabq,  # commands built when named; a usage error is one line, like every other error
    # --install-completion / --show-completion (bash, zsh, fish, powershell).
    add_completion=True,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"colabq {installed_version()}")
        raise typer.Exit(0)


def installed_version() -> str:
    """The installed distribution's version (importlib.metadata: no import of colabq's own)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("colabq")
    except PackageNotFoundError:
        return "unknown (not installed: run `pip install -e .` in the clone)"


def _use_env_file(value: str | None) -> None:
    """`--env-file PATH`: the settings file this command (and every process it starts: a
    worker's pool, its watchdogs) reads over the user's, as `COLABQ_ENV_FILE`, made absolute."""
    if value:
        from worker.settingsfiles import ENV_FILE_VAR

        os.environ[ENV_FILE_VAR] = os.path.abspath(os.path.expanduser(value))


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
    env_file: Annotated[
        str | None,
        typer.Option(
            "--env-file",
            metavar="PATH",
            callback=_use_env_file,
            help="Also read settings from this dotenv file (mode 0600), e.g. a .env here; the "
            "settings file ~/.config/colabq/settings.env is read anyway, and the environment "
            "wins over both.",
        ),
    ] = None,
) -> None:
    pass


P = ParamSpec("P")


def command(fn: Callable[P, None]) -> Callable[P, None]:
    """A command whose known errors print one line and exit with a documented code (each
    command in `COMMANDS` is this, built when the command is first named)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            fn(*args, **kwargs)
        except ColabqError as exc:
            err.print(f"colabq: {exc.advice()}", markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(exit_code_for(exc)) from None

    return wrapper


exit_code_for = exitcodes.for_error


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
