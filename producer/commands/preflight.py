"""`colabq preflight`: the seven pre-flight checks on a training repository, and the copyable
`colabq submit` line when they pass.

The options become `PreflightInputs` and the checks run through `producer.preflight.gate`,
imported when the command runs (so `--help` loads none of the checks). Start-up: see the gate's
docstring; nothing here imports Celery, Redis, huggingface_hub or pydantic-settings.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from producer.clictx import LazySettings

RepoOpt = Annotated[
    Path,
    typer.Option("--repo-dir", help="The training repository, a folder (default: here)."),
]
ConfigOpt = Annotated[
    Path | None, typer.Option(help="The run's config (default: the newest under configs/ …).")
]
ReferenceOpt = Annotated[Path | None, typer.Option(help="The reference config to diff against.")]
ExplainOpt = Annotated[list[str] | None, typer.Option(help="KEY=REASON: why a config key changed.")]
LaunchOpt = Annotated[Path | None, typer.Option(help="The launch script to scan for trackers.")]
EpochsOpt = Annotated[float | None, typer.Option(help="Epochs (default: from the config).")]
EpochSecondsOpt = Annotated[float | None, typer.Option(help="Seconds per epoch, measured.")]
WaiveOpt = Annotated[list[str] | None, typer.Option(help="A check to waive, by name.")]


def preflight(
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
    name: Annotated[str, typer.Option("--name", "-n", help="The run name.")] = "",
    reference: ReferenceOpt = None,
    explain: ExplainOpt = None,
    launch_script: LaunchOpt = None,
    hub_input: Annotated[list[str] | None, typer.Option(help="NAME=URI (hf://, https://).")] = None,
    epochs: EpochsOpt = None,
    seconds_per_epoch: EpochSecondsOpt = None,
    wall: Annotated[str, typer.Option(help="The job's wall-clock cap, e.g. 4h.")] = "12h",
    ttl: Annotated[
        str | None,
        typer.Option(help="The job's own time limit (default: what the wall cap leaves)."),
    ] = None,
    waive: WaiveOpt = None,
    code: Annotated[
        str | None,
        typer.Option(help="git or snapshot: check the commit the job would ship (see submit)."),
    ] = None,
    commit: Annotated[
        str | None, typer.Option(help="With --code: the commit to ship (default: HEAD).")
    ] = None,
    include: Annotated[
        list[str] | None, typer.Option(help="With --code snapshot: an untracked file to add.")
    ] = None,
    gpu: Annotated[str, typer.Option(help="For the submit command: the GPU type.")] = "T4",
    hub_repo: Annotated[str | None, typer.Option(help="For the submit command: USER/REPO.")] = None,
    local_store: Annotated[Path | None, typer.Option(help="For the submit command.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as data.")] = False,
) -> None:
    """Run the pre-flight checks on a training repository (exit 2 if one fails).

    Config diff, run name, paths, monitoring, ETA; with --code, the commit shipped (on the
    remote, not from a dirty tree) and its uv environment (uv.lock current)."""
    from producer.preflight.gate import (
        JOB_SCRIPT_PLACEHOLDER,
        PreflightInputs,
        SubmitTarget,
        _ledger_measurer,
        build_hf_checker,
        job_script,
        quiet_windows_from,
        report_data,
        run_checks,
        submit_command,
    )

    inputs = PreflightInputs(
        run_name=name,
        repo=repo,
        config=config,
        reference=reference,
        explain=tuple(explain or ()),
        launch_script=launch_script,
        hub_inputs=tuple(hub_input or ()),
        epochs=epochs,
        seconds_per_epoch=seconds_per_epoch,
        wall=wall,
        waive=tuple(waive or ()),
        ttl=ttl,
        code=code,
        commit=commit,
        include=tuple(include or ()),
    )
    settings = LazySettings()
    checked = run_checks(
        inputs,
        env=dict(os.environ),
        now=datetime.now(UTC),
        hf=build_hf_checker(settings, inputs.hub_inputs),
        measure_epoch_s=_ledger_measurer(settings),
        quiet_windows=quiet_windows_from(settings),
    )
    target = SubmitTarget(gpu=gpu, hub_repo=hub_repo, local_store=local_store)
    command = submit_command(inputs, checked, target) if checked.report.ok else None
    if as_json:
        print(json.dumps(report_data(checked.report, command, checked.config), indent=2))
    else:
        from rich.console import Console

        from producer.preflight.render import print_report

        console = Console()
        print_report(console, checked.report, submit_command=command)
        if command is not None and not (hub_repo or local_store):
            console.print("Add where results go (--hub-repo OWNER/NAME or --local-store DIR).")
        if command is not None and job_script(checked.launch_script) is None:
            console.print(f"Replace {JOB_SCRIPT_PLACEHOLDER} with the job's bash script.")
    if not checked.report.ok:
        raise typer.Exit(2)
