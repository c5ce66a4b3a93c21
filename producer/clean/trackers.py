"""Step 3 of `colabq clean`: the run's experiment-tracker run.

Owns which trackers the run logs to (`--tracker`, else detected as the pre-flight's monitoring
check detects them) and what is done for each:
- tensorboard: the event folders (holding `events.out.tfevents.*`) under the run's local
  folders, deleted behind the same guard as step 1 (usually step 1 already removed them);
- wandb, mlflow: through the tracker's client library when it is installed here, behind the
  small `TrackerRuns` interface: runs named like the run are found, deleted, and searched for
  again to verify;
- neptune, or a client library that is not installed, or a project that is not known: what
  would be done is shown and the tracker is skipped with the reason, never reported as done.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from producer.clean.steps import Action, StepPlan, remove_tree_action
from producer.preflight.launch_scan import LaunchScan, scan_launch_script
from producer.preflight.monitoring import Tracker, detect_trackers
from producer.preflight.run import find_launch_script

TITLE = "tracker run"
EVENT_FILE_PREFIX = "events.out.tfevents."
_LIBRARY = {Tracker.WANDB: "wandb", Tracker.MLFLOW: "mlflow", Tracker.NEPTUNE: "neptune"}
_WHERE_ENV = {
    Tracker.WANDB: "WANDB_PROJECT",
    Tracker.MLFLOW: "MLFLOW_EXPERIMENT_NAME",
    Tracker.NEPTUNE: "NEPTUNE_PROJECT",
}


class TrackerRuns(Protocol):
    """A tracker's runs in one project / experiment."""

    where: str  # "wandb project alice/coco", for people

    def find(self, run_name: str) -> list[str]: ...  # ids of the runs with this name

    def delete(self, run_id: str) -> None: ...


# Builds the client for a tracker, or returns why it cannot (library missing, project unknown).
RunsFactory = Callable[[Tracker, Mapping[str, str]], "TrackerRuns | str"]


def detect(repo: Path, env: Mapping[str, str], named: Sequence[str]) -> tuple[Tracker, ...]:
    """`--tracker` values if given ("none" = no tracker), else the trackers the run logs to."""
    if named:
        return tuple(Tracker(n) for n in dict.fromkeys(named) if n != "none")
    script = find_launch_script(repo, None)
    scan = scan_launch_script(script, repo) if script is not None else LaunchScan()
    found = detect_trackers(env=env, scan=scan, repo=repo, config_flat={})
    return tuple(s.tracker for s in found)


def event_folders(run_dirs: Sequence[Path]) -> list[Path]:
    found: list[Path] = []
    for run_dir in run_dirs:
        for folder, _, names in os.walk(run_dir):  # does not follow symlinked folders
            if any(n.startswith(EVENT_FILE_PREFIX) for n in names):
                found.append(Path(folder))
    # The outermost folders only: deleting one deletes what is inside it.
    return [f for f in found if not any(f != g and f.is_relative_to(g) for g in found)]


class _Wandb:
    def __init__(self, project: str, entity: str | None) -> None:
        wandb: Any = importlib.import_module("wandb")  # optional: only when installed
        self.api: Any = wandb.Api()
        self.path = f"{entity}/{project}" if entity else project
        self.where = f"wandb project {self.path}"

    def find(self, run_name: str) -> list[str]:
        runs = self.api.runs(self.path, filters={"display_name": run_name})
        return [f"{self.path}/{r.id}" for r in runs]

    def delete(self, run_id: str) -> None:
        self.api.run(run_id).delete()


class _Mlflow:
    def __init__(self, experiment: str) -> None:
        tracking: Any = importlib.import_module("mlflow.tracking")  # optional: when installed
        self.client: Any = tracking.MlflowClient()
        found = self.client.get_experiment_by_name(experiment)
        self.experiment_ids = [found.experiment_id] if found is not None else []
        self.where = f"mlflow experiment {experiment}"

    def find(self, run_name: str) -> list[str]:
        if not self.experiment_ids:
            return []
        quoted = run_name.replace("'", "\\'")
        runs = self.client.search_runs(
            self.experiment_ids, filter_string=f"attributes.run_name = '{quoted}'"
        )
        return [r.info.run_id for r in runs]

    def delete(self, run_id: str) -> None:
        self.client.delete_run(run_id)


def build_tracker_runs(tracker: Tracker, env: Mapping[str, str]) -> TrackerRuns | str:
    """The real client, or why there is none (then the tracker is skipped, never faked)."""
    library = _LIBRARY[tracker]
    where = env.get(_WHERE_ENV[tracker])
    if tracker is Tracker.NEPTUNE:
        return "colabq has no neptune cleaner; trash the run in the Neptune app"
    if importlib.util.find_spec(library) is None:
        return f"the {library} client library is not installed here"
    if not where:
        return f"{_WHERE_ENV[tracker]} is not set, so the run's project is unknown"
    if tracker is Tracker.WANDB:
        return _Wandb(where, env.get("WANDB_ENTITY"))
    return _Mlflow(where)


def _delete_runs_action(runs: TrackerRuns, run_name: str, ids: list[str]) -> Action:
    def do() -> None:
        for run_id in ids:
            runs.delete(run_id)

    def check() -> str | None:
        left = runs.find(run_name)
        return f"{len(left)} run(s) named {run_name!r} still in the {runs.where}" if left else None

    return Action(f"delete {len(ids)} run(s) named {run_name!r} in the {runs.where}", do, check)


def plan_tracker_step(
    trackers: Sequence[Tracker],
    *,
    run_name: str,
    run_dirs: Sequence[Path],
    env: Mapping[str, str],
    runs_factory: RunsFactory = build_tracker_runs,
) -> StepPlan:
    actions: list[Action] = []
    skipped: list[str] = []
    nothing: list[str] = []
    for tracker in trackers:
        if tracker is Tracker.TENSORBOARD:
            folders = event_folders(run_dirs)
            root_of = {f: next(d for d in run_dirs if f.is_relative_to(d)) for f in folders}
            actions += [remove_tree_action(f, root_of[f], "tensorboard events") for f in folders]
            if not folders:
                nothing.append("tensorboard: no event files under the run's folders")
            continue
        runs = runs_factory(tracker, env)
        if isinstance(runs, str):
            where = env.get(_WHERE_ENV[tracker]) or "its project"
            skipped.append(
                f"{tracker}: would delete the run named {run_name!r} in {where}, but {runs}: "
                "delete it by hand in the tracker, or fix that and run clean again"
            )
            continue
        ids = runs.find(run_name)
        if ids:
            actions.append(_delete_runs_action(runs, run_name, ids))
        else:
            nothing.append(f"{tracker}: no run named {run_name!r} in the {runs.where}")
    if not trackers:
        nothing.append("the run logs to no tracker that colabq can see (--tracker to name one)")
    return StepPlan(TITLE, tuple(actions), tuple(skipped), "; ".join(nothing))
