"""`colabq submit`: a job file or a script, an optional sweep, the pre-flight, then enqueue once.

Owns turning what was typed into jobs: the job file's keys and the flags given (flags win) are
validated by one model (`producer.jobfile.SubmitOptions`), a sweep expands them into one job per
point (`producer.sweep`), every job is pre-flighted, and all are recorded in one atomic step and
sent over one connection. Nothing is enqueued while a check fails (unless waived by name); bad
input changes nothing. The pre-flight runs once per distinct set of its inputs (a sweep over
environment values checks the repository once), and the run-name check once per job.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from producer.clictx import JsonOpt, _connect, build_app, err, load_settings, out, queue_for

if TYPE_CHECKING:
    from producer.code.ship import Shipping
    from producer.preflight.gate import Checked
    from producer.sweep import Point
    from worker.records.ledger import Ledger
    from worker.settings import Settings
    from worker.spec import JobSpec

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
    from producer.jobfile import is_job_file, merge_flags, read_job_file, validate
    from producer.sweep import Point, expand, parse_sweep_flags

    typed = {
        key: value
        for key, value in ctx.params.items()
        if key not in _NOT_KEYS
        and getattr(ctx.get_parameter_source(key), "name", "") == "COMMANDLINE"
    }
    if is_job_file(target):
        fields, grid = read_job_file(target)
        where = f"Job file '{target}'" if not typed else f"Job file '{target}' with flags"
    else:
        fields, grid, where = {"script": str(target)}, {}, "command line"
    fields = merge_flags(fields, typed)
    grid = {**grid, **parse_sweep_flags(sweep or ())}
    opts = validate(fields, where)
    if opts.script is None:
        raise _input_error(f"{where}: name the job's script (script: train.sh).")
    if not opts.name:
        raise _input_error("Name the run: --name (or name: in the job file).")
    points = expand(opts.model_dump(), grid, where) if grid else [Point(opts, ())]
    settings = load_settings()
    # Redis first: a broker that is down is said before minutes of checks (a dry run needs none).
    ledger = None if dry_run else _connect(settings)
    shipping = Shipping()
    specs = _build(points, settings, shipping, as_json=as_json)
    if ledger is None:
        _print_plan(points, specs, settings, shipping, as_json=as_json)
        return
    shipping.stage(settings)  # every check passed: the snapshot goes where the VM fetches it
    _enqueue(points, specs, settings, ledger, shipping, as_json=as_json)


def _input_error(message: str) -> Exception:
    from worker.errors import UserInputError

    return UserInputError(message)


def _build(
    points: Sequence[Point], settings: Settings, shipping: Shipping, *, as_json: bool
) -> list[JobSpec]:
    """Every point's spec, pre-flighted. Raises before anything is written."""
    import dataclasses
    import os

    from producer.clictx import LazySettings
    from producer.eta_history import epochs_of, ledger_measurer
    from producer.job_tracker import job_tracker
    from producer.preflight.gate import PreflightFailed, gate
    from producer.preflight.report import validate_waivers
    from producer.submit import build_spec, check_output_repo, destination_of
    from producer.submit_inputs import code_asked, preflight_group, preflight_inputs
    from producer.submit_inputs import submit_request as request_of

    specs: list[JobSpec] = []
    gates: dict[tuple[Any, ...], Checked] = {}
    repos_seen: dict[str, str] = {}
    trackers: dict[tuple[Any, ...], tuple[str | None, str | None]] = {}
    resumes: dict[str, Any] = {}
    lazy = LazySettings(settings)
    measurer = ledger_measurer(lazy)
    _one_commit(points)
    # Every point is validated before any is pre-flighted: a bad value is said at once.
    built = []
    for point in points:
        waivers = tuple(sorted(validate_waivers(point.options.waive)))
        request = request_of(point.options, waivers, resumes, lambda: _connect(settings))
        asked = code_asked(point.options)
        if (state := shipping.survey(asked)) is not None:
            code = shipping.code_spec(state, asked, destination_of(request))
            request = dataclasses.replace(request, code=code)
        built.append((point.options, waivers, build_spec(request), state))
    for o, waivers, spec, state in built:
        inputs = preflight_inputs(o, waivers)
        group = preflight_group(inputs)
        if group not in gates:
            gates[group] = gate(
                inputs,
                console=out,
                as_json=as_json,
                measure_epoch_s=measurer,
                settings=lazy,
                code=state,
            )
        elif (failed := _run_name_failed(o.name or "", waivers)) is not None:
            raise PreflightFailed([failed])
        checked = gates[group]
        dest = spec.artifact.model_dump_json()
        if dest not in repos_seen:
            repos_seen[dest] = check_output_repo(spec, settings)
            if not as_json and len(repos_seen) == 1:
                out.print(f"output repo: {repos_seen[dest]}", markup=False)
        key = (o.tracker, o.repo_dir.resolve(), checked.launch_script)
        if key not in trackers:
            trackers[key] = job_tracker(o.tracker, key[1], checked.launch_script, os.environ)
        tracker_name, tracker_project = trackers[key]
        # The digest changes with the clock (the ETA's end time), so it must not enter the
        # idempotency key: it joins the spec after `build_spec` computed the key.
        spec = spec.model_copy(
            update={
                "preflight_digest": checked.report.digest,
                "config": checked.config.as_posix() if checked.config else None,
                "epochs": epochs_of(o.repo_dir.resolve(), checked.config, o.epochs),
                "tracker": tracker_name,
                "tracker_project": tracker_project,
            }
        )
        specs.append(spec)
    return specs


def _one_commit(points: Sequence[Point]) -> None:
    """A sweep ships one commit: with code, every point names the same repository and commit."""
    from producer.submit_inputs import code_asked

    asked = {code_asked(p.options) for p in points}
    if len(asked) > 1 and any(a.code for a in asked):
        raise _input_error(
            "A sweep ships one commit: commit and repo_dir cannot be swept with code: (submit "
            "each commit on its own)."
        )


def _run_name_failed(name: str, waivers: Sequence[str]) -> str | None:
    from producer.preflight.report import CheckName, Verdict
    from producer.preflight.run_name import check_run_name

    finding = check_run_name(name)
    failed = finding.verdict is Verdict.FAIL and CheckName.RUN_NAME.value not in waivers
    if failed:
        err.print(f"colabq: run name: {finding.saw}", markup=False, highlight=False)
    return CheckName.RUN_NAME.value if failed else None


def _print_plan(
    points: Sequence[Point],
    specs: Sequence[JobSpec],
    settings: Settings,
    shipping: Shipping,
    *,
    as_json: bool,
) -> None:
    from producer.submit_report import print_plan

    print_plan(points, specs, settings.queue_prefix, shipping, as_json=as_json)


def _enqueue(
    points: Sequence[Point],
    specs: Sequence[JobSpec],
    settings: Settings,
    ledger: Ledger,
    shipping: Shipping,
    *,
    as_json: bool,
) -> None:
    from producer.submit import enqueue_many
    from producer.submit_report import print_enqueued
    from worker.records.fleet import count_serving

    allow = points[0].options.allow_same_run
    results = enqueue_many(
        specs, ledger, build_app(settings), settings.queue_prefix, allow_same_run=allow
    )
    queues = sorted({queue_for(s.gpu, settings.queue_prefix) for s in specs})
    served = {q: count_serving(ledger.r, ledger.keys, q) for q in queues}
    warnings = [
        f"no live worker serves {q}: the job waits until one starts (`colabq workers`)"
        for q, n in served.items()
        if not n
    ]
    print_enqueued(
        points, specs, results, served, warnings, settings.queue_prefix, ledger, shipping,
        as_json=as_json,
    )  # fmt: skip
