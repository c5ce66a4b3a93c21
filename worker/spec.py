"""The wire contract: `JobSpec`, what a producer sends and a worker receives.

Validated when submitted and again when a worker decodes it (`decode_spec`). Frozen and
`extra="forbid"`; it never holds a secret (tokens stay on worker hosts as 0600 files).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from worker.errors import SpecError
from worker.records import ids

# Re-exported: the limits' arithmetic lives in `worker.timelimit` (free of pydantic).
from worker.timelimit import KILL_AFTER_S as KILL_AFTER_S
from worker.timelimit import default_ttl_s as default_ttl_s
from worker.timelimit import reserve_s as reserve_s

SCHEMA_VERSION: Literal[1] = 1
MAX_SCRIPT_BYTES = 1024 * 1024
# A Colab session lasts at most about a day: a longer job is split into jobs that resume.
MAX_WALL_S = 24 * 3600
# The shortest wall cap colabq accepts: room for allocation, uploads, the job, the final sync.
MIN_WALL_S = 5 * 60
DEFAULT_CAPACITY_WAIT_S = 2 * 3600.0
MAX_CAPACITY_WAIT_S = 7 * 24 * 3600.0
RUN_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
_INPUT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_REMOTE_SCHEMES = ("hf://", "gs://", "https://")


class Gpu(StrEnum):
    T4 = "T4"
    L4 = "L4"
    G4 = "G4"
    A100 = "A100"
    H100 = "H100"


class ArtifactDest(BaseModel):
    """Where results go: a Hub repo (`hf`) or, for rehearsals on the emulator, a local folder."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["hf", "local"] = "hf"
    repo: str = Field(min_length=1, max_length=200)
    repo_type: Literal["model", "dataset"] = "model"
    prefix: str = Field(default="", max_length=300)

    @model_validator(mode="after")
    def _hub_repo(self) -> ArtifactDest:
        if self.kind == "hf" and (problem := hub_repo_problem(self.repo)):
            raise ValueError(problem)
        return self

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        v = v.strip("/")
        if ".." in v.split("/") or any(c.isspace() for c in v):
            raise ValueError("prefix must not contain '..' or whitespace")
        return v


Seconds = Annotated[float, Field(gt=0)]
NotifyEntry = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,31}(:[A-Za-z_,]{0,200})?$")]
# The seed's known breakages of a uv environment on Colab's image that the VM may repair, only
# in the VM's environment and only when the job opts in by name (`repairs:`).
Repair = Literal["torch-cuda", "nccl", "pytest"]
REPAIRS: tuple[str, ...] = ("torch-cuda", "nccl", "pytest")
# The secrets a job's own processes may read, each asked for by name. `hf_token`: this worker's
# Hub token for the job, as a file whose path is HF_TOKEN_PATH (the job can then write wherever
# that token can). Without it the job never sees a token: the wrapper uploads with one that the
# job's (unprivileged) user cannot read.
Secret = Literal["hf_token"]
_SHA = r"^[0-9a-f]{40}$"


class CodeSpec(BaseModel):
    """The user's repository on the VM, at exactly one commit.

    `git`: the VM fetches `commit` from `remote` (checked fetchable from the worker host before
    allocation; a private remote with the host's read credential, which only travels as a file).
    `snapshot`: the producer staged `git archive` of the commit (plus declared untracked files)
    at `snapshot` (hf:// in the job's Hub destination, file:// in a local store), and the VM
    unpacks it. Either way the job starts in `subdir` of the repository. With `uv` (the
    repository has pyproject.toml and uv.lock, and the lock was current when submitted) the VM
    runs `uv sync --frozen` with the repository's Python pin, then the job under
    `uv run --no-sync`."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    mode: Literal["git", "snapshot"]
    commit: str = Field(pattern=_SHA)
    remote: str = Field(default="", max_length=500)
    snapshot: str = Field(default="", max_length=1000)
    subdir: str = Field(default="", max_length=500)
    uv: bool = False
    # The repository's Python pin as submitted (.python-version, else requires-python): shown
    # in plans and reports; uv itself reads the pin from the checkout.
    python: str = Field(default="", max_length=40)
    repairs: tuple[Repair, ...] = ()

    @model_validator(mode="after")
    def _where(self) -> CodeSpec:
        if self.mode == "git":
            if problem := git_remote_problem(self.remote):
                raise ValueError(problem)
            if self.snapshot:
                raise ValueError("code.snapshot is for mode snapshot; a git job fetches remote")
        else:
            if not self.snapshot.startswith(("hf://", "file:///")):
                raise ValueError(
                    "code.snapshot must be the hf:// or file:/// URI of the staged archive"
                )
            if self.remote:
                raise ValueError("code.remote is for mode git; a snapshot job unpacks snapshot")
        if self.subdir and (problem := job_path_problem(self.subdir)):
            raise ValueError(f"code.subdir: {problem}")
        if len(set(self.repairs)) != len(self.repairs):
            raise ValueError("code.repairs must not repeat a repair")
        return self


def git_remote_problem(remote: str) -> str | None:
    """Why `remote` cannot be what a VM fetches from, or None. Credentials never ride in it."""
    from urllib.parse import urlsplit

    if not remote.strip() or any(c.isspace() or c == "\x00" for c in remote):
        return "code.remote must be the repository's fetch URL (one line, no spaces)"
    if remote.startswith("-"):
        return f"code.remote {remote!r} must not start with '-'"
    if "://" in remote:
        try:
            parts = urlsplit(remote)
        except ValueError:
            return f"code.remote {remote!r} is not a well-formed URL"
        if parts.scheme not in ("https", "http", "ssh", "git", "file"):
            return f"code.remote {remote!r}: use an https://, ssh://, git:// or file:// URL"
        if parts.password is not None or (parts.scheme in ("https", "http") and parts.username):
            return (
                "code.remote carries a credential: give the URL without it, and give worker "
                "hosts a read credential in COLABQ_GIT_CREDENTIALS_FILE"
            )
        return None
    if remote.startswith("/") or re.fullmatch(r"[\w.-]+@[\w.-]+:.+", remote):
        return None  # a path on the VM's file system (rehearsals), or scp-like user@host:path
    return f"code.remote {remote!r}: use a URL, user@host:path, or an absolute path"


class JobSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    schema_version: Literal[1] = SCHEMA_VERSION
    # 16 hex digits, then `.<owner>` under Redis ACLs (`worker.people`).
    job_id: str = Field(pattern=rf"^{ids.JOB_ID.pattern}$")
    idempotency_key: str = Field(min_length=1, max_length=200)
    run_name: str = Field(min_length=1, max_length=96, pattern=RUN_NAME_PATTERN)
    commit: str = Field(default="", max_length=64)
    script: str
    script_name: str = "job.sh"
    hub_inputs: dict[str, str] = Field(default_factory=dict)
    gpu: Gpu
    # Types tried after `gpu`, in order, when Colab cannot serve it now (`--gpu A100,L4`).
    gpu_fallback: tuple[Gpu, ...] = ()
    # How long the job waits for a GPU Colab cannot serve now (from the first refusal), tried
    # again with capped backoff, before it ends FAILED_NO_GPU.
    capacity_wait_s: float = Field(default=DEFAULT_CAPACITY_WAIT_S, gt=0, le=MAX_CAPACITY_WAIT_S)
    high_mem: bool = False
    wall_cap_s: float = Field(default=12 * 3600, gt=0, le=MAX_WALL_S)
    idle_timeout_s: Seconds = 180
    sync_interval_s: Seconds = 15 * 60
    sync_paths: tuple[str, ...] = ()
    ttl_s: Seconds
    artifact: ArtifactDest
    expected_artifacts: tuple[str, ...] = ()
    # The experiment tracker the job logs to ("mlflow", "wandb"; set by submit from the
    # pre-flight or --tracker) and the experiment / project it names, if known: the worker opens
    # the run there, so the job resumes it instead of starting its own.
    tracker: str | None = None
    tracker_project: str | None = Field(default=None, max_length=200)
    budget_units: float = Field(default=0.0, ge=0)
    # An explicit checkpoint to resume from (declared like a hub input, checked before
    # allocation, downloaded by the wrapper, its local path given to the job).
    resume_from: str | None = None
    # How many times a job whose VM was lost (preempted, reclaimed) starts again as a new segment
    # that resumes from its last synced checkpoint.
    max_restarts: int = Field(default=0, ge=0, le=20)
    # The run's config (its path in the training repository) and epochs: earlier runs of a
    # reference config give the pre-flight its measured seconds per epoch.
    config: str | None = Field(default=None, max_length=500)
    epochs: float | None = Field(default=None, gt=0)
    waivers: tuple[str, ...] = ()
    # The repository at one commit, shipped to the VM; None: the job script alone (as before).
    code: CodeSpec | None = None
    secrets: tuple[Secret, ...] = ()
    # The GPU idle watch on the VM (off: None): the job is stopped, synced and ends FAILED once
    # its GPUs stayed below `gpu_idle_below` percent for this long (a hung dataloader, a deadlock).
    gpu_idle_s: float | None = Field(default=None, gt=0, le=MAX_WALL_S)
    gpu_idle_below: float = Field(default=5.0, gt=0, le=100)
    preflight_digest: str | None = None
    submitted_at: datetime
    submitted_from: str = ""
    # Who submitted it (user@host): `colabq status --mine` lists these.
    submitted_by: str = Field(default="", max_length=200)
    # Environment variables the wrapper exports before the job script runs (a sweep's values).
    # Never a secret: names that look like one are refused (secrets stay 0600 files on hosts).
    env: dict[str, str] = Field(default_factory=dict)
    # Who is told of which state changes: `NAME[:STATE,...]`, NAME a target of the notifier
    # host (`worker.notify`; a webhook's URL stays there), terminal states when none are named.
    notify: tuple[NotifyEntry, ...] = ()

    @field_validator("script")
    @classmethod
    def _script(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("the job script is empty")
        if len(v.encode()) > MAX_SCRIPT_BYTES:
            raise ValueError(f"the job script is over {MAX_SCRIPT_BYTES} bytes (1 MiB)")
        return v

    @field_validator("hub_inputs")
    @classmethod
    def _inputs(cls, v: dict[str, str]) -> dict[str, str]:
        for name, uri in v.items():
            if not _INPUT_NAME.fullmatch(name):
                raise ValueError(f"input name {name!r} must match [A-Za-z_][A-Za-z0-9_]*")
            if problem := uri_problem(uri):
                raise ValueError(f"input {name}: {problem}")
        return v

    @field_validator("sync_paths", "expected_artifacts")
    @classmethod
    def _job_paths(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for path in v:
            if problem := job_path_problem(path):
                raise ValueError(problem)
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for name, value in v.items():
            if problem := env_problem(name, value):
                raise ValueError(problem)
        return v

    @field_validator("resume_from")
    @classmethod
    def _resume(cls, v: str | None) -> str | None:
        if v is not None and (not v.startswith("hf://") or uri_problem(v)):
            raise ValueError(
                f"resume_from {v!r} must be an hf://[datasets/]OWNER/REPO/PATH URI of a "
                "checkpoint file or folder"
            )
        return v

    @model_validator(mode="after")
    def _times(self) -> JobSpec:
        if self.ttl_s + KILL_AFTER_S + reserve_s(self.wall_cap_s) > self.wall_cap_s + 1e-6:
            raise ValueError(
                "ttl_s leaves no room inside wall_cap_s for allocation, uploads and the final "
                f"sync (at most {default_ttl_s(self.wall_cap_s):.0f}s for this wall cap)"
            )
        if self.idle_timeout_s > self.wall_cap_s:
            raise ValueError("idle_timeout_s must not exceed wall_cap_s")
        if len(set(self.gpus)) != len(self.gpus):
            raise ValueError("gpu_fallback must not repeat a GPU type")
        if self.code is not None and self.commit and self.commit != self.code.commit:
            raise ValueError("commit must be code.commit (the commit the VM runs)")
        return self

    @model_validator(mode="after")
    def _no_nul(self) -> JobSpec:
        # No argv, environment or path carries a NUL: refused here rather than by the launch cell
        # on an allocated VM. The script travels as a file, which may hold one.
        if where := nul_at(self.model_dump(exclude={"script"})):
            raise ValueError(f"{where} holds a NUL character, which cannot reach the VM: remove it")
        return self

    @property
    def gpus(self) -> tuple[Gpu, ...]:
        """Every GPU type the job may run on, the first choice first."""
        return (self.gpu, *self.gpu_fallback)


def nul_at(value: object, where: str = "") -> str | None:
    """The dotted name of the first string (or key) in `value` that holds a NUL, or None."""
    if isinstance(value, str):
        return (where or "value") if "\x00" in value else None
    items: list[tuple[object, object]] = []
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list | tuple):
        items = list(enumerate(value))
    for key, item in items:
        name = f"{where}.{key}" if where else str(key)
        if isinstance(key, str) and "\x00" in key:
            return name
        if found := nul_at(item, name):
            return found
    return None


def uri_problem(uri: str) -> str | None:
    """Why `uri` is not a usable hf://, gs:// or https:// input URI, or None."""
    from urllib.parse import urlsplit

    from worker.vm.colabq_sync import split_hf_uri

    if uri.startswith("hf://"):
        try:
            split_hf_uri(uri)
        except ValueError as exc:
            return f"{uri!r}: {exc}"
        return None
    if not uri.startswith(_REMOTE_SCHEMES):
        return f"{uri!r} must be an hf://, gs:// or https:// URI (stage local data first)"
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        return f"{uri!r} is not a well-formed URI"
    if any(c.isspace() for c in uri) or not parts.hostname or parts.netloc.startswith("."):
        return f"{uri!r} names no bucket or host (or holds whitespace)"
    if uri.startswith("gs://") and not parts.path.strip("/"):
        return f"{uri!r} names no object in the bucket"
    return None


def job_path_problem(path: str) -> str | None:
    """Why `path` cannot name something in the job's folder on the VM (a sync path, an
    expected artifact), or None: it must stay inside that folder."""
    parts = path.replace("\\", "/").split("/")
    if not path.strip() or any(c in path for c in "\x00\n\r"):
        return f"path {path!r} must be a non-empty single line"
    if path.startswith(("/", "~")) or ".." in parts:
        return f"path {path!r} must stay inside the job's folder (relative, without '..')"
    if len(path) > 500:
        return f"path {path[:40]!r}... is over 500 characters"
    return None


# A Hub repo id as the Hub accepts it (huggingface_hub's REPO_ID_REGEX), with its owner.
_HUB_REPO = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}$")


def hub_repo_problem(repo: str) -> str | None:
    if not _HUB_REPO.fullmatch(repo) or "--" in repo or ".." in repo or repo.endswith(".git"):
        return (
            f"Hub repo {repo!r} must be OWNER/NAME (letters, digits, '-', '_', '.'; no '--' "
            "or '..')"
        )
    return None


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "CREDENTIAL")
MAX_ENV_VALUE = 4096


def env_problem(name: str, value: str) -> str | None:
    """Why `name=value` cannot be a job environment variable, or None."""
    if not _ENV_NAME.fullmatch(name):
        return f"env name {name!r} must match [A-Za-z_][A-Za-z0-9_]* (at most 128)"
    upper = name.upper()
    if upper.startswith(("COLABQ_", "HF_", "BASH_")) or upper in ("PATH", "HOME", "IFS"):
        return f"env {name} is reserved (colabq, the Hub client or bash set it)"
    if any(w in upper for w in _SECRET_WORDS):
        return (
            f"env {name} looks like a secret: secrets never travel in a job; keep them in a "
            "0600 file on the worker host"
        )
    if len(value) > MAX_ENV_VALUE or "\x00" in value or "\n" in value:
        return f"env {name}: the value must be one line of at most {MAX_ENV_VALUE} characters"
    return None


def queue_for(gpu: Gpu | str, prefix: str = "") -> str:
    """The Celery queue of a GPU type: `gpu.<type>`, behind a deployment's optional prefix."""
    return f"{prefix}gpu.{str(gpu).lower()}"


def destination(spec: JobSpec) -> str:
    """The job's place in the store: two live jobs with the same one would overwrite each
    other's checkpoints and logs."""
    return destination_key(spec.artifact.model_dump())


def destination_key(artifact: Mapping[str, Any]) -> str:
    """`destination` from a spec's `artifact` as stored (JSON), without validating the spec."""
    a = artifact
    return f"{a.get('kind')}:{a.get('repo_type', 'model')}:{a.get('repo')}/{a.get('prefix', '')}"


def encode_spec(spec: JobSpec) -> str:
    return spec.model_dump_json()


def decode_spec(payload: str | bytes) -> JobSpec:
    """Validate a spec received from the wire; any problem is one SpecError naming the field."""
    try:
        return JobSpec.model_validate_json(payload)
    except ValidationError as exc:
        raise spec_error(exc) from None


def spec_error(exc: ValidationError) -> SpecError:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"]) or "spec"
    msg = str(err["msg"]).removeprefix("Value error, ")
    return SpecError(field, msg)
