"""The `colabq` command: thin Typer commands over the producer's and worker's plain functions.

Exit codes: 0 success; 1 a known error (the job failed, a check failed, a release unverified);
2 bad input (nothing was changed); 3 Redis unreachable; 4 no such job. A known error prints one
line on stderr and never a traceback.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, ParamSpec

import redis
import typer
from rich.console import Console

from producer import render
from producer.submit import SubmitRequest, build_spec, enqueue
from worker.celery_app import build_app
from worker.deps import build_ledger, build_redis
from worker.errors import (
    BrokerUnavailable,
    ColabqError,
    JobNotFound,
    UserInputError,
)
from worker.ledger import Ledger
from worker.settings import Settings, load_settings
from worker.spec import queue_for
from worker.states import TERMINAL, JobState

app = typer.Typer(
    name="colabq",
    help="Queue long ML training jobs onto Colab GPU sessions; results on the Hugging Face Hub.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
out = Console()
err = Console(stderr=True)

JobArg = Annotated[str, typer.Argument(help="Job id (a unique prefix is enough).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print data instead of a table.")]
Multi = Annotated[list[str] | None, typer.Option()]


P = ParamSpec("P")


def command(fn: Callable[P, None]) -> Callable[P, None]:
    """Register a command whose known errors print one line and exit with a documented code."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            fn(*args, **kwargs)
        except ColabqError as exc:
            err.print(f"colabq: {exc.advice()}", markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(exit_code_for(exc)) from None

    app.command()(wrapper)
    return wrapper


def _connect(settings: Settings) -> Ledger:
    client = build_redis(settings)
    try:
        client.ping()
    except redis.RedisError as exc:
        raise BrokerUnavailable(settings.redis_url, type(exc).__name__) from None
    return build_ledger(settings, client)


@command
def submit(
    script: Annotated[Path, typer.Argument(help="The bash script the job runs on the VM.")],
    name: Annotated[str, typer.Option("--name", "-n", help="Run name, e.g. coco-resnet50-bs256-lr3e-4.")],
    gpu: Annotated[str, typer.Option(help="T4, L4, G4, A100 or H100.")] = "T4",
    high_mem: Annotated[bool, typer.Option("--high-mem")] = False,
    wall: Annotated[str, typer.Option(help="Wall-clock cap, e.g. 4h (unconditional).")] = "12h",
    idle: Annotated[str, typer.Option(help="Idle timeout after the job ends.")] = "180s",
    ttl: Annotated[str | None, typer.Option(help="The job's own TTL (default: fits the cap).")] = None,
    sync_interval: Annotated[str, typer.Option(help="Periodic sync interval.")] = "15m",
    sync: Multi = None,
    hub_input: Annotated[list[str] | None, typer.Option(help="NAME=URI (hf://, gs://, https://).")] = None,
    repo: Annotated[str | None, typer.Option(help="Hub repo for results, USER/REPO.")] = None,
    repo_type: Annotated[str, typer.Option()] = "model",
    prefix: Annotated[str | None, typer.Option(help="Path prefix in the repo (default: run name).")] = None,
    local_store: Annotated[Path | None, typer.Option(help="Rehearsal: a local folder instead of the Hub.")] = None,
    expect: Annotated[list[str] | None, typer.Option(help="An artifact that must exist afterwards.")] = None,
    budget: Annotated[float, typer.Option(help="Compute units the balance must cover.")] = 0.0,
    commit: Annotated[str | None, typer.Option(help="Commit under test (default: git HEAD).")] = None,
    idempotency_key: Annotated[str | None, typer.Option()] = None,
    as_json: JsonOpt = False,
) -> None:
    """Validate a job and enqueue it (once per idempotency key, from any machine)."""
    settings = load_settings()
    req = SubmitRequest(
        script=script,
        run_name=name,
        gpu=gpu,
        high_mem=high_mem,
        wall=wall,
        idle=idle,
        ttl=ttl,
        sync_interval=sync_interval,
        sync_paths=tuple(sync or ()),
        hub_inputs=tuple(hub_input or ()),
        repo=repo,
        repo_type=repo_type,
        prefix=prefix,
        local_store=local_store,
        expect=tuple(expect or ()),
        budget=budget,
        commit=commit,
        idempotency_key=idempotency_key,
    )
    spec = build_spec(req)
    ledger = _connect(settings)
    res = enqueue(spec, ledger, build_app(settings))
    if as_json:
        print(json.dumps({"job_id": res.job_id, "created": res.created, "state": res.state.value}))
        return
    if res.created:
        out.print(f"Enqueued job [bold]{res.job_id}[/] on {queue_for(spec.gpu)} ({spec.run_name}).")
        out.print(f"Follow it with: colabq logs -f {res.job_id}")
    else:
        out.print(
            f"Already submitted as job [bold]{res.job_id}[/] ({res.state.name}); nothing enqueued. "
            "To run it again, pass --idempotency-key with a new value."
        )


@command
def status(
    job: Annotated[str | None, typer.Argument(help="A job id; omit for the list.")] = None,
    limit: Annotated[int, typer.Option(help="How many jobs to list.")] = 30,
    as_json: JsonOpt = False,
) -> None:
    """A table of jobs, or one job's states, reasons and final report."""
    ledger = _connect(load_settings())
    if job is None:
        records = ledger.list_jobs(limit)
        if as_json:
            print(json.dumps([render.job_json(r, []) for r in records]))
        else:
            out.print(render.jobs_table(records))
        return
    rec = ledger.get(ledger.find_by_prefix(job))
    history = ledger.history(rec.job_id)
    if as_json:
        print(json.dumps(render.job_json(rec, history)))
    else:
        out.print(render.job_detail(rec, history))


@command
def logs(
    job: JobArg,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing until the job ends.")] = False,
) -> None:
    """Print a job's output (from any machine); -f follows it live."""
    ledger = _connect(load_settings())
    job_id = ledger.find_by_prefix(job)
    follow_logs(ledger, job_id, follow=follow, write=lambda s: print(s, flush=True))


def follow_logs(ledger: Ledger, job_id: str, *, follow: bool, write: Callable[[str], None]) -> JobState:
    after = "0-0"
    while True:
        for line in ledger.read_log(job_id, after, block_ms=1000 if follow else None):
            after = line.id
            write(line.text)
        state = ledger.get(job_id).state
        if not follow:
            return state
        if state in TERMINAL:
            # Drain what arrived between the last read and the terminal state.
            for line in ledger.read_log(job_id, after):
                after = line.id
                write(line.text)
            return state


@command
def cancel(
    job: JobArg,
    reason: Annotated[str, typer.Option(help="Recorded on the job.")] = "cancelled by user",
) -> None:
    """Ask the job's runner to stop its session (verified) and end the job CANCELLED."""
    ledger = _connect(load_settings())
    job_id = ledger.find_by_prefix(job)
    rec = ledger.get(job_id)
    if rec.state in TERMINAL:
        out.print(f"Job {job_id} is already {rec.state.name}; nothing to cancel.")
        return
    ledger.request_cancel(job_id, reason)
    if rec.state is JobState.QUEUED and not rec.owner:
        try:
            ledger.transition(job_id, JobState.CANCELLED, owner="", reason=reason)
            out.print(f"Job {job_id} cancelled before any worker took it.")
            return
        except ColabqError:
            pass  # a worker claimed it meanwhile: it will see the flag
    out.print(f"Cancel requested for job {job_id}; its runner stops the session and ends it.")


@command
def worker(
    gpu: Annotated[list[str] | None, typer.Option(help="GPU queues to serve (default: all).")] = None,
    concurrency: Annotated[int, typer.Option(help="Slots = Colab sessions at once.")] = 1,
    name: Annotated[str | None, typer.Option(help="Celery node name.")] = None,
    loglevel: Annotated[str, typer.Option()] = "INFO",
) -> None:
    """Run a Celery worker: each slot holds one Colab session at a time."""
    settings = load_settings()
    _connect(settings)
    gpus = [g.upper() for g in (gpu or settings.worker_gpus)]
    argv = ["worker", "-Q", ",".join(queue_for(g) for g in gpus), "-c", str(concurrency)]
    argv += ["-l", loglevel, "-E"] + (["-n", name] if name else [])
    build_app(settings).worker_main(argv)


@command
def beat(loglevel: Annotated[str, typer.Option()] = "INFO") -> None:
    """Run beat (exactly one per deployment) with its own janitor worker.

    The janitor must run even while every GPU slot is busy for hours, so it has its own queue,
    consumed by this process (a worker with an embedded beat), never by the GPU workers.
    """
    settings = load_settings()
    _connect(settings)
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    schedule = str(settings.state_dir / "beat-schedule")
    argv = ["worker", "-B", "-s", schedule, "-Q", "colabq.janitor", "-c", "1", "-l", loglevel]
    build_app(settings).worker_main([*argv, "-n", "colabq-beat@%h"])


@command
def janitor(
    dry_run: Annotated[bool, typer.Option("--dry-run/--act", help="Report only (default).")] = True,
) -> None:
    """One janitor pass now: what it saw, what it did or would do, what it left alone."""
    from worker.janitor import janitor_pass

    for line in janitor_pass(_connect(load_settings()), dry_run=dry_run).lines():
        out.print(line, markup=False)


@command
def demo(
    keep: Annotated[bool, typer.Option(help="Keep the demo folder afterwards.")] = False,
) -> None:
    """Run a demo job end to end: broker, worker, Colab emulator, final report."""
    from producer.demo import run_demo

    raise typer.Exit(run_demo(out, keep=keep))


def exit_code_for(exc: ColabqError) -> int:
    if isinstance(exc, BrokerUnavailable):
        return 3
    if isinstance(exc, JobNotFound):
        return 4
    if isinstance(exc, UserInputError):
        return 2
    return 1


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
