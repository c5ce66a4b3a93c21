"""The `monitoring` check: which experiment tracker the run logs to, and under what project.

Owns the detection rules of the checklist (wandb, neptune, mlflow, tensorboard from the
environment, the launch script's imports and calls, the repository's log folders and the
config) and what is reported about each: project / entity / experiment, tags and group.
No tracker → FAIL; a tracker without a project → WARN. Secrets are reported only as "set".
Reading the launch script is `launch_scan.py`'s.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from producer.preflight.launch_scan import LaunchScan
from producer.preflight.report import CheckName, Finding, Verdict


class Tracker(StrEnum):
    WANDB = "wandb"
    NEPTUNE = "neptune"
    MLFLOW = "mlflow"
    TENSORBOARD = "tensorboard"


_SECRET_ENV = {Tracker.WANDB: "WANDB_API_KEY", Tracker.NEPTUNE: "NEPTUNE_API_TOKEN"}
# Secrets a launch script must not set itself: the script travels with the job.
_SCRIPT_SECRETS = (
    "WANDB_API_KEY",
    "NEPTUNE_API_TOKEN",
    "MLFLOW_TRACKING_PASSWORD",
    "MLFLOW_TRACKING_TOKEN",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
)
_MODULES = {
    Tracker.WANDB: ("wandb",),
    Tracker.NEPTUNE: ("neptune",),
    Tracker.MLFLOW: ("mlflow",),
    Tracker.TENSORBOARD: ("tensorboardX", "torch.utils.tensorboard", "tensorboard"),
}
_CLASSES = {
    Tracker.WANDB: ("WandbLogger", "WandbCallback"),
    Tracker.NEPTUNE: ("NeptuneLogger", "NeptuneCallback"),
    Tracker.MLFLOW: ("MLFlowLogger", "MLflowCallback"),
    Tracker.TENSORBOARD: ("SummaryWriter", "TensorBoardLogger", "TensorBoardCallback"),
}
_CALLS = {
    Tracker.WANDB: ("wandb.init", "WandbLogger"),
    Tracker.NEPTUNE: ("neptune.init_run", "neptune.init", "NeptuneLogger"),
    Tracker.MLFLOW: (
        "mlflow.set_experiment",
        "mlflow.start_run",
        "mlflow.set_tags",
        "mlflow.set_tag",
        "MLFlowLogger",
    ),
    Tracker.TENSORBOARD: ("SummaryWriter", "TensorBoardLogger"),
}
_LOG_FOLDERS = ("runs", "lightning_logs")
# field → (environment variables, call keywords, config leaf names)
_WHERE: dict[Tracker, dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    Tracker.WANDB: {
        "project": (("WANDB_PROJECT",), ("project",)),
        "entity": (("WANDB_ENTITY",), ("entity",)),
        "group": (("WANDB_RUN_GROUP",), ("group",)),
        "tags": (("WANDB_TAGS",), ("tags",)),
    },
    Tracker.NEPTUNE: {
        "project": (("NEPTUNE_PROJECT",), ("project",)),
        "tags": ((), ("tags",)),
        "group": ((), ("group_tags", "group")),
    },
    Tracker.MLFLOW: {
        "experiment": (("MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID"), ("experiment_name",)),
        "tags": ((), ("tags",)),
    },
    Tracker.TENSORBOARD: {"log dir": ((), ("log_dir", "logdir", "save_dir"))},
}
_CONFIG_LEAVES = {"experiment": ("experiment_name", "experiment"), "log dir": ("log_dir",)}
_PROJECT_FIELD = {
    Tracker.WANDB: "project",
    Tracker.NEPTUNE: "project",
    Tracker.MLFLOW: "experiment",
}
_DYNAMIC = "(computed at run time)"


@dataclass(frozen=True)
class TrackerSetup:
    tracker: Tracker
    evidence: tuple[str, ...]
    where: Mapping[str, str]  # "project" → "vision-lab", … only fields that are set


def _redact(uri: str) -> str:
    parts = urllib.parse.urlsplit(uri)
    if parts.username or parts.password:
        host = parts.hostname or ""
        host += f":{parts.port}" if parts.port else ""
        return urllib.parse.urlunsplit(parts._replace(netloc=f"***@{host}"))
    return uri


def _evidence(
    tracker: Tracker,
    env: Mapping[str, str],
    scan: LaunchScan,
    repo: Path,
    config_flat: Mapping[str, Any],
) -> list[str]:
    found: list[str] = []
    if tracker in _SECRET_ENV and env.get(_SECRET_ENV[tracker]):
        found.append(f"{_SECRET_ENV[tracker]} set")
    if tracker is Tracker.MLFLOW and env.get("MLFLOW_TRACKING_URI"):
        found.append(f"MLFLOW_TRACKING_URI={_redact(env['MLFLOW_TRACKING_URI'])}")
    for module in sorted(scan.modules):
        if any(module == m or module.startswith(m + ".") for m in _MODULES[tracker]):
            found.append(f"the launch code imports {module}")
            break
    found += [f"the launch code uses {n}" for n in _CLASSES[tracker] if n in scan.names]
    if tracker.value in scan.report_to:
        found.append(f"report_to/log_with = {tracker.value!r}")
    if tracker is Tracker.TENSORBOARD:
        found += [f"{d}/ folder in the repo" for d in _LOG_FOLDERS if (repo / d).is_dir()]
    for key, value in config_flat.items():
        values = value if isinstance(value, list) else [value]
        names = key.lower().split(".")
        if tracker.value in names or (
            names[-1] in ("report_to", "logger", "loggers", "log_with")
            and tracker.value in [str(v).lower() for v in values]
        ):
            found.append(f"config key {key}")
            break
    return found


def _config_value(flat: Mapping[str, Any], tracker: Tracker, field: str) -> str | None:
    leaves = {*_CONFIG_LEAVES.get(field, (field,)), f"{tracker.value}_{field}"}
    others = {t.value for t in Tracker} - {tracker.value}
    for key, value in flat.items():
        parts = key.lower().split(".")
        if parts[-1] in leaves and not others & set(parts) and value not in (None, "", []):
            return ",".join(map(str, value)) if isinstance(value, list) else str(value)
    return None


def _where(
    tracker: Tracker, env: Mapping[str, str], scan: LaunchScan, config_flat: Mapping[str, Any]
) -> dict[str, str]:
    found: dict[str, str] = {}
    calls = [c for c in scan.calls if c.func in _CALLS[tracker]]
    for field, (env_names, keywords) in _WHERE[tracker].items():
        value = next((f"{env[n]} (env {n})" for n in env_names if env.get(n)), None)
        for call in calls if value is None else ():
            for kw in keywords:
                if kw in call.kwargs:
                    value = call.kwargs[kw] or _DYNAMIC
                    value += f" ({call.func} in {call.file.name})"
                    break
            if value is not None:
                break
        if value is None and (from_config := _config_value(config_flat, tracker, field)):
            value = f"{from_config} (config)"
        if value is not None:
            found[field] = value
    return found


def detect_trackers(
    *, env: Mapping[str, str], scan: LaunchScan, repo: Path, config_flat: Mapping[str, Any]
) -> tuple[TrackerSetup, ...]:
    setups = []
    for tracker in Tracker:
        evidence = _evidence(tracker, env, scan, repo, config_flat)
        if evidence:
            setups.append(
                TrackerSetup(tracker, tuple(evidence), _where(tracker, env, scan, config_flat))
            )
    return tuple(setups)


def check_monitoring(
    *, env: Mapping[str, str], scan: LaunchScan | None, repo: Path, config_flat: Mapping[str, Any]
) -> Finding:
    """Judge the tracker setup; `env` merges the caller's environment and the script's exports."""
    scanned = scan or LaunchScan()
    setups = detect_trackers(env=env, scan=scanned, repo=repo, config_flat=config_flat)
    notes = [f"[note] {p}" for p in scanned.problems]
    if scan is None:
        notes.append("[note] no launch script given: its imports were not checked")
    if not setups:
        return Finding(
            CheckName.MONITORING,
            Verdict.FAIL,
            "no monitoring: no tracker in the environment (WANDB_API_KEY, NEPTUNE_API_TOKEN, "
            "MLFLOW_TRACKING_URI), the launch code, the config, or runs/ / lightning_logs/",
            "set up a tracker (e.g. WANDB_API_KEY + WANDB_PROJECT and `import wandb`): no "
            "monitoring is almost never right for a multi-hour run; --waive monitoring if it is",
            tuple(notes),
        )
    saw_parts, details, no_project, no_cohort = [], list(notes), [], []
    for s in setups:
        where = ", ".join(f"{k} {v}" for k, v in s.where.items()) or "no project/tags set"
        saw_parts.append(f"{s.tracker} ({where})")
        details.append(f"[{s.tracker}] detected by: {'; '.join(s.evidence)}")
        project_field = _PROJECT_FIELD.get(s.tracker)
        if project_field and project_field not in s.where:
            no_project.append(f"{s.tracker} {project_field}")
        if s.tracker is not Tracker.TENSORBOARD and not {"tags", "group"} & set(s.where):
            no_cohort.append(s.tracker.value)
    saw = "; ".join(saw_parts)
    in_script = [name for name in _SCRIPT_SECRETS if name in scanned.env]
    if in_script:
        saw += f"; the launch script sets {', '.join(in_script)} itself"
    cohort = (
        f"set tags or a group for cohort comparison ({', '.join(no_cohort)})" if no_cohort else ""
    )
    actions = []
    if in_script:
        actions.append(
            f"remove {', '.join(in_script)} from the launch script (it travels with the job); "
            "give the worker the secret instead"
        )
    if no_project:
        actions.append(f"set the {', '.join(no_project)} so the run lands where it compares")
    if actions:
        action = "; ".join(actions + ([cohort] if cohort else []))
        return Finding(CheckName.MONITORING, Verdict.WARN, saw, action, tuple(details))
    return Finding(CheckName.MONITORING, Verdict.PASS, saw, cohort or "none", tuple(details))
