"""The experiment tracker a submitted job logs to, for its spec (`tracker`, `tracker_project`):
`--tracker`, else what the pre-flight's rules detect in the job's launch script and environment.

The worker opens the run in that experiment / project, so the job's own `set_experiment` (or
`wandb.init(project=...)`) agrees with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from worker.errors import UserInputError

TRACKERS = ("wandb", "mlflow")  # the trackers whose runs colabq opens and finishes
# tracker -> (environment variable, call, keyword) naming its experiment / project
_PROJECT_SOURCES = {
    "mlflow": ("MLFLOW_EXPERIMENT_NAME", "mlflow.set_experiment", "experiment_name"),
    "wandb": ("WANDB_PROJECT", "wandb.init", "project"),
}


def check_tracker_option(named: str | None) -> None:
    if named is not None and named not in (*TRACKERS, "none"):
        raise UserInputError(f"--tracker {named!r}: use wandb, mlflow or none.")


def job_tracker(
    named: str | None, repo: Path, launch_script: Path | None, env: Mapping[str, str]
) -> tuple[str | None, str | None]:
    """(tracker, its experiment / project if the job names it) for the spec: `--tracker` if
    given ("none": no tracker), else the first of wandb / mlflow the pre-flight's rules detect.
    The worker opens the run in that experiment, so the job's own `set_experiment` agrees."""
    check_tracker_option(named)
    if named == "none":
        return None, None
    from producer.preflight.launch_scan import LaunchScan, scan_launch_script
    from producer.preflight.monitoring import detect_trackers

    scan = scan_launch_script(launch_script, repo) if launch_script is not None else LaunchScan()
    job_env = {**env, **scan.env}  # the script's own exports are what the job runs with
    if named is None:
        found = detect_trackers(env=job_env, scan=scan, repo=repo, config_flat={})
        named = next((s.tracker.value for s in found if s.tracker.value in TRACKERS), None)
        if named is None:
            return None, None
    var, func, keyword = _PROJECT_SOURCES[named]
    project = job_env.get(var) or next(
        (c.kwargs[keyword] for c in scan.calls if c.func == func and c.kwargs.get(keyword)), None
    )
    return named, project if project and len(project) <= 200 else None
