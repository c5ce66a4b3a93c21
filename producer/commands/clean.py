"""`colabq clean RUN`: the restart/kill cleanup of one run, in the spec's order (local folder,
artifacts, tracker, jobs), shown by default and done with `--yes`. What each step does is
`producer.clean`'s; this checks the options, reads the run's facts, and prints.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from producer.clean.plan import (
    _RUN_NAME,
    RunFacts,
    build_deleters,
    build_planners,
    find_run_dirs,
    find_run_jobs,
)
from producer.clean.steps import run_steps, summarise
from worker.errors import UserInputError

if TYPE_CHECKING:
    from worker.records.ledger import Ledger
    from worker.settings import Settings


def _connect(settings: Settings) -> Ledger:
    from worker.deps import connect_ledger

    return connect_ledger(settings)


def clean(
    run: Annotated[str, typer.Argument(help="The run name.")],
    repo: Annotated[
        Path, typer.Option("--repo-dir", help="The training repository (folder).")
    ] = Path("."),
    run_dir: Annotated[
        Path | None,
        typer.Option(
            help="The run's folder, relative to --repo-dir (default: runs/RUN, outputs/RUN)."
        ),
    ] = None,
    delete_remote: Annotated[
        bool, typer.Option("--delete-remote", help="Also delete the run's stored artifacts.")
    ] = False,
    tracker: Annotated[
        list[str] | None, typer.Option(help="wandb, mlflow, neptune, tensorboard or none.")
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Act (default: show only).")] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help='Print one object at the end: {"run", "dry_run", "steps", "lines", "summary"}.',
        ),
    ] = False,
) -> None:
    """Clean up a failed or killed run, in order: local folder, artifacts, tracker, jobs."""
    if not _RUN_NAME.fullmatch(run) or run in (".", ".."):
        raise UserInputError(f"Run name {run!r} is not a run name (letters, digits, . _ -).")
    named = tuple(tracker or ())
    for name in named:
        if name not in ("wandb", "mlflow", "neptune", "tensorboard", "none"):
            raise UserInputError(
                f"--tracker {name!r}: use wandb, mlflow, neptune, tensorboard or none."
            )
    base = repo.absolute()
    run_dirs, looked_at = find_run_dirs(base, run, run_dir)
    from producer.clictx import load_settings

    settings = load_settings()
    ledger = _connect(settings)
    facts = RunFacts(run, base, run_dirs, looked_at, find_run_jobs(ledger, run))
    # Cleaning cancels the run's jobs and deletes their results: under ACLs, one's own only.
    from producer.ask import Requests
    from worker.people.guard import check_may_change

    check_may_change(ledger, [job.job_id for job in facts.jobs], "clean")
    console = Console(highlight=False)
    lines: list[str] = []

    def say(line: str) -> None:
        lines.append(line)
        if not as_json:
            console.print(line, markup=False, soft_wrap=True)

    say(f"colabq clean {run}: {'cleaning up' if yes else 'dry run, nothing will be changed'}")
    asks = Requests.of(ledger, settings)
    planners = build_planners(
        facts,
        asks,
        delete_remote=delete_remote,
        trackers=named,
        env=dict(os.environ),
        deleters=build_deleters(run, settings),
    )
    results = run_steps(planners, act=yes, run_name=run, say=say)
    if yes and facts.jobs:
        asks.note([job.job_id for job in facts.jobs], "clean", f"colabq clean {run}")
    summary = summarise(results, act=yes)
    if as_json:
        import json

        steps = [
            {"number": r.number, "title": r.title, "outcome": r.outcome.value} for r in results
        ]
        data = {"run": run, "dry_run": not yes, "steps": steps, "lines": lines, "summary": summary}
        print(json.dumps(data))
    else:
        say(summary)
