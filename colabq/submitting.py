"""`Client.submit`'s half: the arguments as `colabq submit`'s options, then the CLI's own steps
(`producer.submit_flow`: validate, sweep, pre-flight, stage the code, enqueue), quietly.

Arguments left out (None) are not given: a job file's keys then stand, as for flags not typed.
Durations are text as on the command line (`"6h"`, `"1h30m"`) or a number of seconds; KEY=VALUE
options (`env`, `hub_input`, `explain`) a mapping or `"KEY=VALUE"` strings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from colabq.results import Submission, submitted
from worker.errors import UserInputError

if TYPE_CHECKING:
    from worker.records.ledger import Ledger
    from worker.settings import Settings

Duration = str | float  # "6h", "1h30m", or seconds


class SubmitOptions(TypedDict, total=False):
    """The other options of `colabq submit` (`colabq submit --help`), by their key names."""

    capacity_wait: Duration
    high_mem: bool
    idle: Duration
    ttl: Duration
    sync_interval: Duration
    sync: str | Sequence[str]
    hub_input: Mapping[str, str] | Sequence[str]
    repo_type: Literal["model", "dataset"]
    prefix: str
    expect: str | Sequence[str]
    budget: float
    commit: str
    include: str | Sequence[str]
    repairs: Sequence[Literal["torch-cuda", "nccl", "pytest"]]
    idempotency_key: str
    config: str | Path
    reference: str | Path
    explain: Mapping[str, str] | Sequence[str]
    launch_script: str | Path
    epochs: float
    seconds_per_epoch: float
    resume_from: str
    max_restarts: int
    notify: str | Sequence[str]
    tracker: Literal["wandb", "mlflow", "none"]
    allow_same_run: bool
    secrets: str | Sequence[Literal["hf_token"]]  # what the job's own processes may read
    max_parallel: int
    after: str | Sequence[str]
    gpu_idle: Duration  # stop the job (after a final sync) when its GPUs idle this long


_DURATIONS = frozenset({"wall", "idle", "ttl", "sync_interval", "capacity_wait", "gpu_idle"})
_PAIRS = frozenset({"env", "hub_input", "explain"})


def duration_text(seconds: float) -> str:
    """A number of seconds as the duration text the options take (`90` -> `90s`)."""
    return f"{int(seconds)}s" if float(seconds).is_integer() else f"{seconds}s"


def as_options(given: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments given (not None; a sequence not empty) as the options `colabq submit`
    would have been typed with."""
    typed: dict[str, Any] = {}
    for key, value in given.items():
        if value is None or (isinstance(value, list | tuple) and not value):
            continue
        if key in _DURATIONS and isinstance(value, int | float) and not isinstance(value, bool):
            value = duration_text(value)
        elif key in _PAIRS and isinstance(value, Mapping):
            value = [f"{k}={v}" for k, v in value.items()]
        elif key in _PAIRS and isinstance(value, str):
            value = [value]
        typed[key] = value
    return typed


def target_of(script: str | Path | None, job_file: str | Path | None) -> tuple[Path, bool]:
    """(what `colabq submit` would be given, whether `script` is an option on top of it)."""
    if job_file is not None:
        return Path(job_file), script is not None
    if script is None:
        raise UserInputError("Name the job's script (submit('train.sh', ...)) or a job_file.")
    return Path(script), False


def run_submit(
    settings: Settings,
    connect: Callable[[], Ledger],
    target: Path,
    typed: Mapping[str, Any],
    *,
    grid: Mapping[str, Sequence[Any]] | None,
    dry_run: bool,
) -> Submission:
    """`colabq submit`'s steps, printing nothing: the pre-flight's reports, the plan and the
    warnings are returned. Raises (PreflightFailed, UserInputError, ...) with nothing enqueued."""
    from producer.code.ship import Shipping
    from producer.submit_flow import (
        Source,
        build_specs,
        enqueue_points,
        points_of,
        resolve_points_after,
    )
    from producer.submit_report import job_rows, plan_rows

    points = points_of(target, typed, grid=grid, source=Source("submit()", "arguments"))
    # Redis first: a broker that is down is said before minutes of checks (a dry run needs none).
    ledger = None if dry_run else connect()
    deps = resolve_points_after(points, ledger) if ledger is not None else []
    shipping = Shipping()
    built = build_specs(points, settings, shipping)
    specs = built.specs
    warnings: tuple[str, ...] = ()
    sweep = None
    if ledger is None:
        rows = plan_rows(points, specs, settings.queue_prefix, shipping)
    else:
        shipping.stage(settings)  # every check passed: the snapshot goes where the VM fetches it
        sent = enqueue_points(points, specs, settings, ledger, deps)
        rows = job_rows(points, specs, sent.results, sent.served, settings.queue_prefix, shipping)
        warnings, sweep = tuple(sent.warnings), sent.sweep or None
    return Submission(
        jobs=tuple(submitted(r, s.gpu.value) for r, s in zip(rows, specs, strict=True)),
        dry_run=ledger is None,
        warnings=warnings,
        plan=tuple(shipping.plan_lines(specs)),
        preflight=tuple(built.reports),
        output_repo=built.output_repos[0] if built.output_repos else None,
        sweep=sweep,
    )
