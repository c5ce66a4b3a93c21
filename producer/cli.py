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
from typing import TYPE_CHECKING, Annotated, ParamSpec

import typer
from rich.console import Console

from worker.errors import (
    BrokerUnavailable,
    ColabqError,
    JobNotFound,
    UserInputError,
)
from worker.states import TERMINAL, JobState

if TYPE_CHECKING:
    from worker.ledger import Ledger
    from worker.settings import Settings

# Heavy imports (celery, redis, pydantic, huggingface_hub) happen inside the commands that need
# them, so that `colabq preflight` and `--help` start fast.

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


def load_settings(**overrides: object) -> Settings:
    from worker.settings import load_settings as _load

    return _load(**overrides)


def build_app(settings: Settings):  # type: ignore[no-untyped-def]
    from worker.celery_app import build_app as _build

    return _build(settings)


def queue_for(gpu: object, prefix: str) -> str:
    from worker.spec import queue_for as _queue_for

    return _queue_for(str(gpu), prefix)


def _connect(settings: Settings) -> Ledger:
    from worker.deps import connect_ledger

    return connect_ledger(settings)


@command
def submit(
    script: Annotated[Path, typer.Argument(help="The bash script the job runs on the VM.")],
    name: Annotated[
        str, typer.Option("--name", "-n", help="Run name, e.g. coco-resnet50-bs256-lr3e-4.")
    ],
    gpu: Annotated[str, typer.Option(help="T4, L4, G4, A100 or H100.")] = "T4",
    high_mem: Annotated[bool, typer.Option("--high-mem")] = False,
    wall: Annotated[str, typer.Option(help="Wall-clock cap, e.g. 4h (unconditional).")] = "12h",
    idle: Annotated[str, typer.Option(help="Idle timeout after the job ends.")] = "180s",
    ttl: Annotated[
        str | None, typer.Option(help="The job's own TTL (default: fits the cap).")
    ] = None,
    sync_interval: Annotated[str, typer.Option(help="Periodic sync interval.")] = "15m",
    sync: Multi = None,
    hub_input: Annotated[
        list[str] | None, typer.Option(help="NAME=URI (hf://, gs://, https://).")
    ] = None,
    repo: Annotated[str | None, typer.Option(help="Hub repo for results, USER/REPO.")] = None,
    repo_type: Annotated[str, typer.Option()] = "model",
    prefix: Annotated[
        str | None, typer.Option(help="Path prefix in the repo (default: run name).")
    ] = None,
    local_store: Annotated[
        Path | None, typer.Option(help="Rehearsal: a local folder instead of the Hub.")
    ] = None,
    expect: Annotated[
        list[str] | None, typer.Option(help="An artifact that must exist afterwards.")
    ] = None,
    budget: Annotated[float, typer.Option(help="Compute units the balance must cover.")] = 0.0,
    commit: Annotated[
        str | None, typer.Option(help="Commit under test (default: git HEAD).")
    ] = None,
    idempotency_key: Annotated[str | None, typer.Option()] = None,
    repo_dir: Annotated[Path, typer.Option(help="Pre-flight: the training repo.")] = Path("."),
    config: Annotated[Path | None, typer.Option(help="Pre-flight: the run's config.")] = None,
    reference: Annotated[Path | None, typer.Option(help="Pre-flight: the reference.")] = None,
    explain: Annotated[list[str] | None, typer.Option(help="Pre-flight: KEY=REASON.")] = None,
    launch_script: Annotated[Path | None, typer.Option(help="Pre-flight: not SCRIPT.")] = None,
    epochs: Annotated[float | None, typer.Option(help="Pre-flight: epochs.")] = None,
    seconds_per_epoch: Annotated[float | None, typer.Option(help="Pre-flight.")] = None,
    waive: Annotated[list[str] | None, typer.Option(help="Pre-flight: accept a check.")] = None,
    resume_from: Annotated[
        str | None,
        typer.Option(help="A job id or hf:// checkpoint to resume from (a new segment)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the pre-flight checks, then validate a job and enqueue it (once per idempotency key).

    Nothing is enqueued while a check fails, unless it is waived by name (--waive config-diff);
    the waivers and the report's digest are recorded on the job. Paths of the pre-flight options
    are relative to --repo-dir.
    """
    from producer.preflight.report import validate_waivers
    from producer.preflight_cli import PreflightInputs, gate
    from producer.submit import SubmitRequest, build_spec, enqueue

    settings = load_settings()
    waivers = tuple(sorted(validate_waivers(waive or ())))
    resume = None
    if resume_from:
        from producer.submit import resolve_resume

        # A job id resolves to its checkpoint and prefix: segments of one run share a prefix.
        ledger_for_resume = None if resume_from.startswith("hf://") else _connect(settings)
        resume = resolve_resume(resume_from, ledger_for_resume)
        if prefix is None and resume.prefix is not None:
            prefix = resume.prefix
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
        waivers=waivers,
        resume_from=resume.uri if resume else None,
    )
    spec = build_spec(req)
    ledger = _connect(settings)
    preflight = PreflightInputs(
        run_name=name,
        repo=repo_dir,
        config=config,
        reference=reference,
        explain=tuple(explain or ()),
        launch_script=launch_script or script.resolve(),
        hub_inputs=tuple(hub_input or ()),
        epochs=epochs,
        seconds_per_epoch=seconds_per_epoch,
        wall=wall,
        waive=waivers,
    )
    from producer.eta_history import epochs_of, ledger_measurer

    checked = gate(preflight, console=out, as_json=as_json, measure_epoch_s=ledger_measurer())
    report = checked.report
    import os

    from producer.submit import check_output_repo

    repo_seen = check_output_repo(spec, os.environ, Path.home())
    if not as_json:
        out.print(f"output repo: {repo_seen}", markup=False)
    # The digest changes with the clock (the ETA's end time), so it must not enter the
    # idempotency key: it joins the spec after `build_spec` computed the key.
    spec = spec.model_copy(
        update={
            "preflight_digest": report.digest,
            "config": checked.config.as_posix() if checked.config else None,
            "epochs": epochs_of(repo_dir.resolve(), checked.config, epochs),
        }
    )
    res = enqueue(spec, ledger, build_app(settings), settings.queue_prefix)
    if as_json:
        print(
            json.dumps(
                {
                    "job_id": res.job_id,
                    "created": res.created,
                    "state": res.state.value,
                    "waivers": list(spec.waivers),
                    "preflight_digest": spec.preflight_digest,
                }
            )
        )
        return
    if res.created:
        queue = queue_for(spec.gpu, settings.queue_prefix)
        out.print(f"Enqueued job [bold]{res.job_id}[/] on {queue} ({spec.run_name}).")
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
    from producer import render

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
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing until the job ends.")
    ] = False,
) -> None:
    """Print a job's output (from any machine); -f follows it live."""
    ledger = _connect(load_settings())
    job_id = ledger.find_by_prefix(job)
    follow_logs(ledger, job_id, follow=follow, write=lambda s: print(s, flush=True))


def follow_logs(
    ledger: Ledger, job_id: str, *, follow: bool, write: Callable[[str], None]
) -> JobState:
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
    gpu: Annotated[
        list[str] | None, typer.Option(help="GPU queues to serve (default: all).")
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Slots = Colab sessions at once.")] = 1,
    name: Annotated[str | None, typer.Option(help="Celery node name.")] = None,
    loglevel: Annotated[str, typer.Option()] = "INFO",
) -> None:
    """Run a Celery worker: each slot holds one Colab session at a time."""
    settings = load_settings()
    _connect(settings)
    gpus = [g.upper() for g in (gpu or settings.worker_gpus)]
    queues = ",".join(queue_for(g, settings.queue_prefix) for g in gpus)
    argv = ["worker", "-Q", queues, "-c", str(concurrency)]
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


# Commands defined in their own modules, registered like the ones above.
from producer.clean import clean  # noqa: E402
from producer.preflight_cli import preflight  # noqa: E402

command(preflight)
command(clean)


@command
def stage(
    path: Annotated[Path, typer.Argument(help="Local file or folder (a data set, a checkpoint).")],
    to: Annotated[str, typer.Option("--to", help="hf://[datasets/]OWNER/REPO/PATH")],
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace data at --to.")] = False,
) -> None:
    """Upload local data to a private Hub repo, to declare it later with --hub-input NAME=URI."""
    from producer.stage import stage_command

    stage_command(path, to, overwrite)


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
