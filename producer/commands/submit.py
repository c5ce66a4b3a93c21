"""`colabq submit`: a job file or a script, an optional sweep, the pre-flight, then enqueue once.

Owns turning what was typed into jobs: the job file's keys and the flags given (flags win) are
validated by one model (`producer.jobfile.SubmitOptions`), a sweep expands them into one job per
point (`producer.sweep`), every job is pre-flighted, and all are recorded in one atomic step and
sent over one connection. Nothing is enqueued while a check fails (unless waived by name); bad
input changes nothing. The pre-flight runs once per distinct set of its inputs (a sweep over
environment values checks the repository once), and the run-name check once per job.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from producer.clictx import JsonOpt, _connect, err, load_settings, out

if TYPE_CHECKING:
    from producer.submit_flow import Voice

Multi = Annotated[list[str] | None, typer.Option()]
# Options of this command that are not job keys.
_NOT_KEYS = frozenset({"target", "sweep", "dry_run", "as_json"})


def submit(
    ctx: typer.Context,  # which options were typed (they override the job file's keys)
    target: Annotated[
        Path,
        typer.Argument(
            help="A job file (.yaml, .yml, .json: every option below is a key) or the bash "
            "script the job runs on the VM.",
            metavar="JOB_FILE|SCRIPT",
            show_default=False,
        ),
    ],
    name: Annotated[
        str | None,
        typer.Option("--name", "-n", help="Run name, e.g. coco-resnet50-bs256-lr3e-4."),
    ] = None,
    gpu: Annotated[
        str,
        typer.Option(
            help="T4, L4, G4, A100 or H100; or several in order of preference (A100,L4): each "
            "attempt tries them in turn, and any worker serving one of them may take the job.",
        ),
    ] = "T4",
    capacity_wait: Annotated[
        str | None,
        typer.Option(
            "--capacity-wait",
            help="How long the job waits for a GPU Colab cannot serve now (tried again with "
            "backoff) before it ends FAILED_NO_GPU. Default: 2h.",
        ),
    ] = None,
    high_mem: Annotated[
        bool, typer.Option("--high-mem", help="Ask Colab for a high-memory VM.")
    ] = False,
    wall: Annotated[str, typer.Option(help="Wall-clock cap, 5m to 24h (unconditional).")] = "12h",
    idle: Annotated[str, typer.Option(help="Idle timeout after the job ends.")] = "180s",
    ttl: Annotated[
        str | None,
        typer.Option(
            help="The job's own time limit; past it the job ends TIMED_OUT (default: the wall "
            "cap less a reserve for allocation and uploads and a 2-minute kill grace).",
        ),
    ] = None,
    sync_interval: Annotated[str, typer.Option(help="Periodic sync interval.")] = "15m",
    gpu_idle: Annotated[
        str | None,
        typer.Option(
            "--gpu-idle",
            help="e.g. 20m: stop the job (after a final sync; FAILED) once its GPUs stayed "
            "below 5 % that long, as with a hung dataloader or a deadlock. Off by default.",
        ),
    ] = None,
    sync: Annotated[
        list[str] | None, typer.Option(help="A path in the job's folder to sync (checkpoints).")
    ] = None,
    hub_input: Annotated[
        list[str] | None, typer.Option(help="NAME=URI (hf://, gs://, https://).")
    ] = None,
    hub_repo: Annotated[str | None, typer.Option(help="Hub repo for results, OWNER/NAME.")] = None,
    repo_type: Annotated[str, typer.Option(help="model or dataset.")] = "model",
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
        str | None,
        typer.Option(help="The commit to ship with --code, or to record (default: git HEAD)."),
    ] = None,
    code: Annotated[
        str | None,
        typer.Option(
            help="git or snapshot: the job runs the repository's commit, fetched by the VM from "
            "its remote (git) or staged as an archive with the results (snapshot).",
        ),
    ] = None,
    include: Annotated[
        list[str] | None,
        typer.Option(
            help="With --code snapshot: an untracked file or folder to add (in --repo-dir)."
        ),
    ] = None,
    repairs: Annotated[
        list[str] | None,
        typer.Option(
            "--repair",
            help="torch-cuda, nccl or pytest: a known breakage of the uv environment the VM may "
            "repair, in the VM only.",
        ),
    ] = None,
    secrets: Annotated[
        list[str] | None,
        typer.Option(
            "--secret",
            help="hf_token: the job's own processes get the worker's Hub token for it, as a "
            "file (HF_TOKEN_PATH); the job can then write wherever that token can. Without it "
            "the job never sees a token.",
        ),
    ] = None,
    notify: Annotated[
        list[str] | None,
        typer.Option(
            help="NAME[:STATE,...]: tell the notifier host's target NAME (a webhook or a "
            "command hook, `colabq notifier`) of these state changes (default: the terminal "
            "ones). Repeatable.",
        ),
    ] = None,
    idempotency_key: Annotated[
        str | None,
        typer.Option(
            help="One job per key while that job is live or succeeded: submitting it again "
            "yields that job (default: a hash of the run name, commit, script and settings).",
        ),
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option(help="NAME=VALUE: an environment variable of the job (never a secret)."),
    ] = None,
    repo_dir: Annotated[
        Path, typer.Option(help="The training repository (folder): checked, and shipped by --code.")
    ] = Path("."),
    config: Annotated[Path | None, typer.Option(help="Pre-flight: the run's config.")] = None,
    reference: Annotated[Path | None, typer.Option(help="Pre-flight: the reference.")] = None,
    explain: Annotated[list[str] | None, typer.Option(help="Pre-flight: KEY=REASON.")] = None,
    launch_script: Annotated[Path | None, typer.Option(help="Pre-flight: not SCRIPT.")] = None,
    epochs: Annotated[float | None, typer.Option(help="Pre-flight: epochs.")] = None,
    seconds_per_epoch: Annotated[float | None, typer.Option(help="Pre-flight.")] = None,
    waive: Annotated[
        list[str] | None, typer.Option(help="Pre-flight: accept a check (or dirty-tree).")
    ] = None,
    resume_from: Annotated[
        str | None,
        typer.Option(help="A job id or hf:// checkpoint to resume from (a new segment)."),
    ] = None,
    max_restarts: Annotated[
        int,
        typer.Option(
            "--max-restarts",
            help="Restart a job whose VM was lost (preempted) as a new segment that resumes "
            "from its last synced checkpoint (its first --sync path), at most N (0-20) times.",
        ),
    ] = 0,
    tracker: Annotated[
        str | None,
        typer.Option(
            help="wandb, mlflow or none: the tracker whose run colabq opens for the job (and "
            "closes if the job dies with it running). Default: what the pre-flight detects.",
        ),
    ] = None,
    allow_same_run: Annotated[
        bool,
        typer.Option(
            "--allow-same-run",
            help="Enqueue even though a live job of this run writes to the same place.",
        ),
    ] = False,
    sweep: Annotated[
        list[str] | None,
        typer.Option(
            help="KEY=V1,V2: one job per value (repeat for a grid). KEY is an option above "
            "(gpu, wall, config, epochs, ...) or env.NAME.",
        ),
    ] = None,
    after: Annotated[
        list[str] | None,
        typer.Option(
            help="JOB[:ok|any|notok]: start only once JOB ended as asked (ok: SUCCEEDED, the "
            "default; notok: any other end; any); if it cannot any more, end CANCELLED. "
            "Repeatable.",
        ),
    ] = None,
    max_parallel: Annotated[
        int | None,
        typer.Option(
            "--max-parallel",
            help="A sweep: at most N of its points running at once, fleet-wide; the others "
            "wait in the queue, holding no worker.",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Check and print the plan; enqueue nothing.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Pre-flight, validate and enqueue a job (once per idempotency key), or a sweep of jobs.

    Nothing is enqueued while a check fails, unless it is waived by name (--waive config-diff);
    the waivers and the report's digest are recorded on the job. Paths of the pre-flight options
    are relative to --repo-dir. In a job file, script, repo_dir and local_store are relative to
    the file; flags given here override its keys. With --code git|snapshot the job runs the
    repository's commit (HEAD, or --commit) on the VM: it must be on the remote (git), its
    uv.lock current, and the tree clean (unless --waive dirty-tree).
    """
    from producer.code.ship import Shipping
    from producer.submit_flow import build_specs, enqueue_points, points_of, resolve_points_after
    from producer.submit_report import print_enqueued, print_plan

    typed = {
        key: value
        for key, value in ctx.params.items()
        if key not in _NOT_KEYS
        and getattr(ctx.get_parameter_source(key), "name", "") == "COMMANDLINE"
    }
    points = points_of(target, typed, sweep_flags=sweep or ())
    settings = load_settings()
    # Redis first: a broker that is down is said before minutes of checks (a dry run needs none).
    ledger = None if dry_run else _connect(settings)
    deps = resolve_points_after(points, ledger) if ledger is not None else []
    shipping = Shipping()
    specs = build_specs(points, settings, shipping, _voice(as_json=as_json)).specs
    if ledger is None:
        print_plan(points, specs, settings.queue_prefix, shipping, as_json=as_json)
        return
    shipping.stage(settings)  # every check passed: the snapshot goes where the VM fetches it
    sent = enqueue_points(points, specs, settings, ledger, deps)
    print_enqueued(
        points, specs, sent.results, sent.served, sent.warnings, settings.queue_prefix, ledger,
        shipping, as_json=as_json,
    )  # fmt: skip


def _voice(*, as_json: bool) -> Voice:
    """What the command prints while it checks: each pre-flight report, the output repo
    checked (not with --json), a sweep point's failed run name (on stderr)."""
    from producer.submit_flow import Voice

    def output_repo(text: str) -> None:
        if not as_json:
            out.print(f"output repo: {text}", markup=False)

    def run_name_failed(saw: str) -> None:
        err.print(f"colabq: run name: {saw}", markup=False, highlight=False)

    return Voice(out, as_json, output_repo, run_name_failed)
