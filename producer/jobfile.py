"""Job files and the options of `colabq submit`, as one model.

Owns `SubmitOptions`: every `colabq submit` option is a field (the option's name with dashes as
underscores), so a job file (`colabq submit job.yaml`) and the command line are validated by the
same model. Unknown keys are refused by name (with the closest known key); flags given on the
command line override the file. Paths in a job file (`script`, `repo_dir`, `local_store`) are
relative to the file's folder; the pre-flight's paths (`config`, `reference`, `launch_script`)
are relative to `repo_dir`, as on the command line. A `sweep:` section is returned apart.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from worker.errors import UserInputError

JOB_FILE_SUFFIXES = (".yaml", ".yml", ".json")
MAX_JOB_FILE_BYTES = 256 * 1024
# Keys given as KEY=VALUE pairs on the command line; a job file may give them as a mapping.
PAIR_KEYS = {"hub_input": "NAME=URI", "explain": "KEY=REASON", "env": "NAME=VALUE"}
# Keys holding a path that a job file gives relative to its own folder.
FILE_RELATIVE = ("script", "repo_dir", "local_store")


def _scalar_text(v: object) -> object:
    """YAML reads `wall: 90` as a number: keep it text, so the duration parser says what is
    wrong with it (a bare number has no unit)."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int | float):
        return repr(v) if isinstance(v, float) else str(v)
    return v


class SubmitOptions(BaseModel):
    """What `colabq submit` was asked, before it is checked against the repository."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    script: Path | None = None
    name: str | None = None
    gpu: str = "T4"
    capacity_wait: str | None = None
    high_mem: bool = False
    wall: str = "12h"
    idle: str = "180s"
    ttl: str | None = None
    sync_interval: str = "15m"
    gpu_idle: str | None = None  # off; e.g. 20m: stop a job whose GPUs idle that long
    sync: tuple[str, ...] = ()
    hub_input: tuple[str, ...] = ()
    hub_repo: str | None = None
    repo_type: Literal["model", "dataset"] = "model"
    prefix: str | None = None
    local_store: Path | None = None
    expect: tuple[str, ...] = ()
    budget: float = Field(default=0.0, ge=0)
    commit: str | None = None
    idempotency_key: str | None = None
    repo_dir: Path = Path(".")
    config: Path | None = None
    reference: Path | None = None
    explain: tuple[str, ...] = ()
    launch_script: Path | None = None
    epochs: float | None = Field(default=None, gt=0)
    seconds_per_epoch: float | None = Field(default=None, gt=0)
    waive: tuple[str, ...] = ()
    resume_from: str | None = None
    max_restarts: int = Field(default=0, ge=0, le=20)
    tracker: Literal["wandb", "mlflow", "none"] | None = None
    allow_same_run: bool = False
    # A sweep's cap: at most this many of its points running at once (`worker.flow.slots`).
    max_parallel: int | None = Field(default=None, ge=1, le=10_000)
    # Jobs this one waits for: JOB[:ok|any|notok] each (`worker.flow.deps`).
    after: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    # Who is told of which state changes (`worker.notify`): NAME[:STATE,...] each.
    notify: tuple[str, ...] = ()
    # The repository shipped to the VM at one commit (`--commit`, else HEAD): fetched from its
    # remote (git) or staged as an archive with the untracked files `include` names (snapshot).
    code: Literal["git", "snapshot"] | None = None
    include: tuple[str, ...] = ()  # relative to repo_dir, like the pre-flight's paths
    repairs: tuple[Literal["torch-cuda", "nccl", "pytest"], ...] = ()
    # Secrets the job's own processes may read, by name (worker.spec.Secret).
    secrets: tuple[Literal["hf_token"], ...] = ()

    @field_validator(
        "wall", "idle", "ttl", "sync_interval", "gpu_idle", "name", "capacity_wait", mode="before"
    )
    @classmethod
    def _text(cls, v: object) -> object:
        return _scalar_text(v)

    @field_validator("gpu", mode="before")
    @classmethod
    def _gpus(cls, v: object) -> object:
        """`gpu: A100` or, in order of preference, `gpu: [A100, L4]`."""
        if isinstance(v, list | tuple) and all(isinstance(g, str) for g in v):
            return ",".join(v)
        return _scalar_text(v)

    @field_validator(
        "sync", "expect", "waive", "include", "repairs", "secrets", "after", mode="before"
    )
    @classmethod
    def _list(cls, v: object) -> object:
        return [v] if isinstance(v, str) else v

    @field_validator("notify", mode="before")
    @classmethod
    def _notify(cls, v: object) -> object:
        return [v] if isinstance(v, str) else v

    @field_validator("hub_input", "explain", "env", mode="before")
    @classmethod
    def _pairs(cls, v: object) -> object:
        if isinstance(v, Mapping):
            return [f"{k}={_scalar_text(x)}" for k, x in v.items()]
        return [v] if isinstance(v, str) else v


FIELDS = tuple(SubmitOptions.model_fields)


# Keys whose repeatable option is spelled in the singular.
_OPTION_NAMES = {"repairs": "--repair", "secrets": "--secret"}


def option_name(key: str) -> str:
    """The command-line spelling of a key: `hub_repo` -> `--hub-repo`."""
    return _OPTION_NAMES.get(key) or "--" + key.replace("_", "-")


def options_error(exc: ValidationError, where: str) -> UserInputError:
    """The first problem of a ValidationError as one line naming the key (or option)."""
    err = exc.errors()[0]
    loc = [str(p) for p in err["loc"]]
    key = loc[0] if loc else "?"
    if err["type"] == "extra_forbidden":
        close = difflib.get_close_matches(key.replace("-", "_"), FIELDS, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        return UserInputError(
            f"{where}: unknown key {key!r}{hint}. Keys are the `colabq submit` options with "
            "dashes as underscores (`colabq submit --help`)."
        )
    shown = key if where != "command line" else option_name(key)
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] in ("finite_number", "float_parsing"):
        msg = "must be a finite number"
    return UserInputError(f"{where}: {shown}: {msg}.")


def validate(values: Mapping[str, Any], where: str) -> SubmitOptions:
    try:
        return SubmitOptions.model_validate(dict(values))
    except ValidationError as exc:
        raise options_error(exc, where) from None


def merge_flags(fields: Mapping[str, Any], typed: Mapping[str, Any]) -> dict[str, Any]:
    """The job file's keys with the flags typed on top: a flag replaces its key, except the
    NAME=VALUE keys (env, hub_input, explain), where a flag replaces only the names it gives."""
    merged = dict(fields)
    for key, value in typed.items():
        if key in PAIR_KEYS and key in merged:
            pairs = validate({key: merged[key]}, "job file").model_dump()[key]
            given = {str(v).partition("=")[0] for v in value}
            merged[key] = [p for p in pairs if p.partition("=")[0] not in given] + list(value)
        else:
            merged[key] = value
    return merged


def read_job_file(path: Path) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """(the job's keys, its `sweep:` grid) from a YAML or JSON file; paths made absolute."""
    import yaml

    shown = str(path)
    if not path.is_file():
        raise UserInputError(f"Job file '{shown}' not found: pass a YAML job file or a script.")
    if path.stat().st_size > MAX_JOB_FILE_BYTES:
        raise UserInputError(f"Job file '{shown}' is over 256 KiB: is it really a job file?")
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise UserInputError(f"Job file '{shown}' is not UTF-8 text.") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UserInputError(f"Job file '{shown}' is not valid YAML{where}.") from None
    if not isinstance(data, dict):
        raise UserInputError(
            f"Job file '{shown}' must be a mapping of keys (script: train.sh, name: ...)."
        )
    for key in data:
        if not isinstance(key, str):
            raise UserInputError(f"Job file '{shown}': key {key!r} is not text.")
    sweep = data.pop("sweep", None) or {}
    data.pop("steps", None)  # a pipeline's steps: `producer.pipeline` reads them
    if not isinstance(sweep, dict) or not all(isinstance(v, list) and v for v in sweep.values()):
        raise UserInputError(
            f"Job file '{shown}': sweep must map keys to non-empty lists "
            "(sweep: {{env.LR: [1e-4, 3e-4]}})."
        )
    base = path.resolve().parent
    for key in FILE_RELATIVE:
        if isinstance(data.get(key), str):
            data[key] = str(base / data[key])
    validate(data, f"Job file '{shown}'")  # fail on the file alone, before any flag
    return data, {str(k): list(v) for k, v in sweep.items()}


def is_job_file(path: Path) -> bool:
    return path.suffix.lower() in JOB_FILE_SUFFIXES


def finite(option: str, value: float | None) -> float | None:
    """Typer parses `--epochs nan` as a float: refuse what is not a finite number."""
    if value is not None and not math.isfinite(value):
        raise UserInputError(f"{option} {value}: must be a finite number.")
    return value
