"""Running the five pre-flight checks on the user's repository and building the report (the
gate adds the `code` and `environment` checks, `producer/code/checks.py`).

Owns `PreflightOptions` (what the user asked for), `run_preflight` (which takes its side
effects as arguments: the clock reading, the environment, the remote checker, the epoch-time
measurement) and the few defaults that join the checks: the launch script to scan when none is
named, and epochs read from the config. Each check lives in its own module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from producer.preflight.config_check import check_config_diff
from producer.preflight.config_diff import flatten
from producer.preflight.configs import ConfigParseError, LoadedConfig, load_config
from producer.preflight.discovery import MAX_AGE_DAYS
from producer.preflight.eta import check_eta
from producer.preflight.launch_scan import scan_launch_script
from producer.preflight.monitoring import check_monitoring
from producer.preflight.paths import check_paths
from producer.preflight.remote import RemoteChecker
from producer.preflight.report import Report, validate_waivers
from producer.preflight.run_name import check_run_name
from producer.preflight.values import as_number
from worker.quiet import parse_quiet_windows

# Scanned, in this order, when no launch script is named.
DEFAULT_LAUNCH_SCRIPTS = (
    "train.sh",
    "train.py",
    "run.sh",
    "launch.sh",
    "main.py",
    "scripts/train.sh",
    "scripts/train.py",
)
EPOCH_KEYS = ("epochs", "num_epochs", "max_epochs", "num_train_epochs", "n_epochs")


@dataclass(frozen=True)
class PreflightOptions:
    """What to check. Relative paths are relative to `repo`; invalid waivers or quiet windows
    raise (a `UserInputError`) when the options are built."""

    repo: Path
    config: Path
    run_name: str
    reference: Path | None = None
    explain: Mapping[str, str] = field(default_factory=dict)
    launch_script: Path | None = None
    hub_inputs: Mapping[str, str] = field(default_factory=dict)
    epochs: float | None = None
    seconds_per_epoch: float | None = None
    wall_cap_s: float | None = None
    time_limit_s: float | None = None  # the job's own (its TTL); None: the wall cap's default
    gpu_idle: bool = False  # the job has a GPU idle watch (--gpu-idle): nothing to suggest
    quiet_windows: tuple[str, ...] = ()
    zone: ZoneInfo | None = None
    waive: frozenset[str] = frozenset()
    max_config_age_days: float = MAX_AGE_DAYS

    def __post_init__(self) -> None:
        validate_waivers(self.waive)
        parse_quiet_windows(self.quiet_windows)


def _in_repo(repo: Path, path: Path) -> Path:
    return path if path.is_absolute() else repo / path


def find_launch_script(repo: Path, named: Path | None) -> Path | None:
    if named is not None:
        return _in_repo(repo, named)
    return next((repo / p for p in DEFAULT_LAUNCH_SCRIPTS if (repo / p).is_file()), None)


def epochs_from_config(flat: Mapping[str, Any]) -> float | None:
    for key, value in flat.items():
        number = as_number(value)
        if key.rsplit(".", 1)[-1].lower() in EPOCH_KEYS and number is not None and number > 0:
            return number
    return None


def _relative_to(path: Path, repo: Path) -> str:
    try:
        return path.resolve().relative_to(repo).as_posix()
    except ValueError:
        return path.resolve().as_posix()


def run_preflight(
    opts: PreflightOptions,
    *,
    now: datetime,
    env: Mapping[str, str],
    remote_checker: RemoteChecker,
    measure_epoch_s: Callable[[str], float | None] | None = None,
) -> Report:
    """Run every check and return the report; never raises for a problem in the repository.
    `measure_epoch_s(reference)` gives the seconds per epoch of earlier colabq runs of the
    reference config (its path relative to the repository), or None if there were none."""
    repo = opts.repo.resolve()
    config_path = _in_repo(repo, opts.config)
    intended: LoadedConfig | ConfigParseError | OSError
    try:
        intended = load_config(config_path)
    except (ConfigParseError, OSError) as exc:
        intended = exc
    loaded = intended if isinstance(intended, LoadedConfig) else None
    flat = flatten(loaded.data) if loaded is not None else {}
    script = find_launch_script(repo, opts.launch_script)
    scan = scan_launch_script(script, repo) if script is not None else None
    # The script's own exports are what the job will run with; they win over this shell's.
    job_env = {**env, **(scan.env if scan is not None else {})}
    reference = _in_repo(repo, opts.reference) if opts.reference is not None else None
    chosen: list[Path] = []
    config_finding = check_config_diff(
        intended,
        repo=repo,
        reference=reference,
        explain=opts.explain,
        now=now,
        max_age_days=opts.max_config_age_days,
        on_reference=chosen.append,
    )
    measure: Callable[[], float | None] | None = None
    if measure_epoch_s is not None and chosen:
        ref_rel = _relative_to(chosen[0], repo)
        measure = lambda: measure_epoch_s(ref_rel)  # noqa: E731
    findings = [
        config_finding,
        check_run_name(opts.run_name),
        check_paths(
            loaded,
            config_path=config_path,
            repo=repo,
            env=env,
            remote_checker=remote_checker,
            hub_inputs=opts.hub_inputs,
        ),
        check_monitoring(env=job_env, scan=scan, repo=repo, config_flat=flat),
        check_eta(
            epochs=opts.epochs if opts.epochs is not None else epochs_from_config(flat),
            seconds_per_epoch=opts.seconds_per_epoch,
            now=now,
            zone=opts.zone,
            quiet_windows=parse_quiet_windows(opts.quiet_windows),
            wall_cap_s=opts.wall_cap_s,
            time_limit_s=opts.time_limit_s,
            measure_epoch_s=measure,
            gpu_idle=opts.gpu_idle,
        ),
    ]
    return Report.build(findings, opts.waive)
