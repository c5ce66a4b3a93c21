"""The `colabq` command: thin Typer commands over the producer's and worker's plain functions.

Exit codes are one table, `producer/exitcodes.py` (the README prints it): a known error exits
with its code, and `status JOB`, `logs -f` and `adopt` with the job's outcome. A known error
prints one line on stderr and never a traceback.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ParamSpec

import typer

from producer import exitcodes
from producer.cligroup import OneLineErrors
from worker.errors import ColabqError
from worker.states import TERMINAL, JobState

if TYPE_CHECKING:
    from worker.records.ledger import LogLine

# Start-up matters (`colabq status` and `colabq preflight` are typed often): heavy imports
# (celery, redis, pydantic, rich, huggingface_hub) happen inside the commands that need them,
# and each command's module is imported, and its options built, only when that command runs
# (or when `--help` or shell completion lists it).

# Where each command's function lives, in the order `colabq --help` lists them.
COMMANDS = {
    "preflight": "producer.preflight_cli",
    "submit": "producer.submit_cli",
    "retry": "producer.retry_cli",
    "status": "producer.status_cli",
    "logs": __name__,
    "cancel": "producer.cancel_cli",
    "stage": __name__,
    "clean": "producer.clean",
    "worker": __name__,
    "beat": __name__,
    "workers": "producer.fleet_cli",
    "drain": "producer.fleet_cli",
    "undrain": "producer.fleet_cli",
    "doctor": "producer.doctor",
    "janitor": __name__,
    "adopt": __name__,
    "demo": __name__,
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


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    pass


JobArg = Annotated[str, typer.Argument(help="Job id (a unique prefix is enough).")]


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


from producer.clictx import (  # noqa: E402
    JsonOpt,
    _connect,
    build_app,
    err,
    load_settings,
    out,
    queue_for,
)


def logs(
    job: JobArg,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow", "-f", help="Keep printing until the job ends; exit with its outcome."
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help='One JSON object a line: {"id", "line", "stream"}.')
    ] = False,
) -> None:
    """Print a job's output (from any machine); -f follows it live and exits with its outcome
    (while it waits in its queue, stderr says for which workers)."""
    settings = load_settings()
    ledger = _connect(settings)
    job_id = ledger.find_by_prefix(job)

    def emit(line: LogLine) -> None:
        if as_json:
            row = {"id": line.id, "line": line.text, "stream": line.stream}
            print(json.dumps(row), flush=True)
        else:
            print(line.text, flush=True)

    notice = None
    if follow:
        from producer.waiting import WaitNotices

        def say(text: str) -> None:
            err.print(text, markup=False, highlight=False, soft_wrap=True)

        notice = WaitNotices(ledger, job_id, lambda g: queue_for(g, settings.queue_prefix), say)
    from producer.follow import follow_lines

    state = follow_lines(ledger, job_id, follow=follow, emit=emit, on_state=notice)
    if follow:
        raise typer.Exit(exitcodes.for_state(state))


def worker(
    gpu: Annotated[
        list[str] | None, typer.Option(help="GPU queues to serve (default: all).")
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Slots = Colab sessions at once.")] = 1,
    name: Annotated[str | None, typer.Option(help="Celery node name.")] = None,
    loglevel: Annotated[str, typer.Option()] = "INFO",
) -> None:
    """Run a Celery worker: each slot holds one Colab session at a time."""
    check_gpu_types(gpu or ())
    settings = load_settings()
    settings.ensure_state_dir()
    _connect(settings)
    gpus = [g.upper() for g in (gpu or settings.worker_gpus)]
    # The pool's processes read their settings again: they allocate only the types served here.
    os.environ["COLABQ_WORKER_GPUS"] = ",".join(gpus)
    queues = ",".join(queue_for(g, settings.queue_prefix) for g in gpus)
    argv = ["worker", "-Q", queues, "-c", str(concurrency)]
    # One name per worker process by default: two workers on one host are two (cards, drains).
    argv += ["-l", loglevel, "-E", "-n", name or f"colabq-{os.getpid()}@%h"]
    build_app(settings).worker_main(argv)


def check_gpu_types(given: list[str] | tuple[str, ...]) -> None:
    """Refuse, before anything starts, a GPU type nothing is ever sent to (a worker serving
    `gpu.v100` would wait forever)."""
    from worker.errors import UserInputError
    from worker.spec import Gpu

    for g in given:
        if g.strip().upper() not in Gpu.__members__:
            raise UserInputError(
                f"--gpu {g!r} is not a Colab GPU type: serve one or several of "
                f"{', '.join(Gpu)} (--gpu T4 --gpu L4)."
            )


def beat(loglevel: Annotated[str, typer.Option()] = "INFO") -> None:
    """Run beat (exactly one per deployment) with its own janitor worker.

    The janitor must run even while every GPU slot is busy for hours, so it has its own queue,
    consumed by this process (a worker with an embedded beat), never by the GPU workers.
    """
    settings = load_settings()
    settings.ensure_state_dir()
    _connect(settings)
    schedule = str(settings.state_dir / "beat-schedule")
    argv = ["worker", "-B", "-s", schedule, "-Q", "colabq.janitor", "-c", "1", "-l", loglevel]
    build_app(settings).worker_main([*argv, "-n", "colabq-beat@%h"])


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


def adopt(job: JobArg, as_json: JsonOpt = False) -> None:
    """Take over a job whose worker host is gone, and finish it from this machine.

    Needs the account's Colab credentials and the worker settings (Redis, state dir, Hub token
    file). Waits until the job's lease expired; runs until the job ends, then prints its state
    and exits with the job's outcome (as `logs -f`).
    """
    import socket

    from worker.session.owner import adopt_job

    settings = load_settings()
    settings.ensure_state_dir()
    ledger = _connect(settings)
    job_id = ledger.find_by_prefix(job)
    outcome = adopt_job(job_id, settings, ledger, worker_name=f"adopter@{socket.gethostname()}")
    if outcome is None:
        rec = ledger.get(job_id)
        over = rec.state in TERMINAL
        why = "it has a live owner"
        if over or rec.state is JobState.QUEUED:
            why = "it is over" if over else "it is queued: a worker takes it"
        if as_json:
            row = {"job_id": job_id, "adopted": False, "state": rec.state.value, "reason": why}
            print(json.dumps(row))
        else:
            out.print(f"Job {job_id} is {rec.state.name}: {why}; nothing done.")
        raise typer.Exit(exitcodes.OK if over else exitcodes.FAILED)
    if as_json:
        state, reason = outcome.state.value, outcome.reason
        print(json.dumps({"job_id": job_id, "adopted": True, "state": state, "reason": reason}))
    else:
        out.print(f"Job {job_id} {outcome.state.name}: {outcome.reason}", markup=False)
    raise typer.Exit(exitcodes.for_state(outcome.state))


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


def stage(
    path: Annotated[Path, typer.Argument(help="Local file or folder (a data set, a checkpoint).")],
    to: Annotated[str, typer.Option("--to", help="hf://[datasets/]OWNER/REPO/PATH")],
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace data at --to.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Upload local data to a private Hub repo, to declare it later with --hub-input NAME=URI."""
    from producer.stage import stage_command

    stage_command(path, to, overwrite, as_json)


exit_code_for = exitcodes.for_error


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
