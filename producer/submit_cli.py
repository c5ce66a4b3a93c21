"""`colabq submit`: pre-flight, validation, the output repo check, then enqueue once.

Nothing is enqueued while a check fails (unless waived by name); bad input changes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from producer.clictx import JsonOpt, _connect, build_app, err, load_settings, out, queue_for

Multi = Annotated[list[str] | None, typer.Option()]


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
    max_restarts: Annotated[
        int,
        typer.Option(
            "--max-restarts",
            min=0,
            max=20,
            help="Restart a job whose VM was lost (preempted) as a new segment that resumes "
            "from its last synced checkpoint (its first --sync path), at most N times.",
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
    as_json: JsonOpt = False,
) -> None:
    """Run the pre-flight checks, then validate a job and enqueue it (once per idempotency key).

    Nothing is enqueued while a check fails, unless it is waived by name (--waive config-diff);
    the waivers and the report's digest are recorded on the job. Paths of the pre-flight options
    are relative to --repo-dir.
    """
    from producer.preflight.report import validate_waivers
    from producer.preflight_cli import PreflightInputs, gate
    from producer.submit import SubmitRequest, build_spec, check_tracker_option, enqueue

    check_tracker_option(tracker)
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
        max_restarts=max_restarts,
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

    from producer.submit import check_output_repo, job_tracker

    repo_seen = check_output_repo(spec, os.environ, Path.home())
    tracker_name, tracker_project = job_tracker(
        tracker, repo_dir.resolve(), checked.launch_script, os.environ
    )
    if not as_json:
        out.print(f"output repo: {repo_seen}", markup=False)
    # The digest changes with the clock (the ETA's end time), so it must not enter the
    # idempotency key: it joins the spec after `build_spec` computed the key.
    spec = spec.model_copy(
        update={
            "preflight_digest": report.digest,
            "config": checked.config.as_posix() if checked.config else None,
            "epochs": epochs_of(repo_dir.resolve(), checked.config, epochs),
            "tracker": tracker_name,
            "tracker_project": tracker_project,
        }
    )
    res = enqueue(
        spec, ledger, build_app(settings), settings.queue_prefix, allow_same_run=allow_same_run
    )
    from worker.records.fleet import count_serving

    queue = queue_for(spec.gpu, settings.queue_prefix)
    served = count_serving(ledger.r, ledger.keys, queue)
    no_worker = (
        None
        if served
        else f"no live worker serves {queue}: the job waits until one starts (`colabq workers`)"
    )
    if as_json:
        print(
            json.dumps(
                {
                    "job_id": res.job_id,
                    "created": res.created,
                    "state": res.state.value,
                    "waivers": list(spec.waivers),
                    "preflight_digest": spec.preflight_digest,
                    "tracker": spec.tracker,
                    "queue": queue,
                    "live_workers": served,
                    "warnings": [no_worker] if no_worker else [],
                }
            )
        )
        return
    if no_worker:
        err.print(f"colabq: warning: {no_worker}", markup=False, highlight=False)
    if res.created:
        out.print(f"Enqueued job [bold]{res.job_id}[/] on {queue} ({spec.run_name}).")
        out.print(f"Follow it with: colabq logs -f {res.job_id}")
    else:
        out.print(
            f"Already submitted as job [bold]{res.job_id}[/] ({res.state.name}); nothing enqueued. "
            "To run it again, pass --idempotency-key with a new value."
        )
