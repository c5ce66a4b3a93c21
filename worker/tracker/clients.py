"""Which tracker client a job or a host uses: opening a job's run, and the janitor's clients.

The one module that knows both trackers' clients (`mlflow_runs.py`, `wandb_runs.py`), above
them and the common part they build on (`runs.py`), so that none of those imports its caller.
Each client's module, and its tracker's library, is imported only when a job or a host names it.
"""

from __future__ import annotations

from collections.abc import Mapping

from worker.settings import Settings
from worker.spec import JobSpec
from worker.tracker.runs import MLFLOW, WANDB, OpenedRun, TrackerRef, TrackerRuns, wandb_run_id


def open_run(spec: JobSpec, settings: Settings) -> OpenedRun | None:
    """The run a job with a tracker logs to, opened where the tracker needs it (a remote call for
    MLflow); None when colabq cannot assign one (no tracker, or no MLflow server configured).
    Raises TrackerError when the tracker cannot be reached."""
    if spec.tracker == MLFLOW and settings.mlflow_tracking_uri:
        from worker.tracker.mlflow_runs import MlflowRuns

        return MlflowRuns.from_settings(settings).open(spec)
    if spec.tracker == WANDB:
        project = spec.tracker_project or settings.wandb_project
        return OpenedRun(
            TrackerRef(WANDB, wandb_run_id(spec.job_id), settings.wandb_entity, project)
        )
    return None


def clients_from(settings: Settings) -> Mapping[str, TrackerRuns]:
    """The trackers this host can reach, by kind (a janitor's, from its settings)."""
    found: dict[str, TrackerRuns] = {}
    if settings.mlflow_tracking_uri:
        from worker.tracker.mlflow_runs import MlflowRuns

        found[MLFLOW] = MlflowRuns.from_settings(settings)
    if settings.wandb_api_key_file is not None:
        from worker.tracker.wandb_runs import WandbRuns

        found[WANDB] = WandbRuns.from_settings(settings)
    return found
