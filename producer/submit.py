"""Building a `JobSpec` from what the user typed, and enqueueing it exactly once.

Every check here happens before anything is written: bad input changes nothing and loses nothing.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import secrets
import socket
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from producer.joblist import whoami
from worker.errors import SpecError, UserInputError
from worker.gate.wire import Dep, Submit, Submitted
from worker.records.ledger import Ledger
from worker.settings import Settings
from worker.spec import (
    MAX_CAPACITY_WAIT_S,
    MAX_SCRIPT_BYTES,
    MAX_WALL_S,
    MIN_WALL_S,
    RUN_NAME_PATTERN,
    ArtifactDest,
    CodeSpec,
    Gpu,
    JobSpec,
    default_ttl_s,
    spec_error,
    uri_problem,
)
from worker.states import JobState
from worker.store.coverage import find_uncovered, uncovered_advice
from worker.utils import pairs, parse_duration_s


@dataclass(frozen=True)
class SubmitRequest:
    """The `colabq submit` options, as typed (strings are parsed in `build_spec`)."""

    script: Path
    run_name: str
    gpu: str = "T4"
    high_mem: bool = False
    wall: str = "12h"
    idle: str = "180s"
    ttl: str | None = None
    sync_interval: str = "15m"
    gpu_idle: str | None = None  # a duration: the GPU idle watch (off when None)
    sync_paths: Sequence[str] = ()
    hub_inputs: Sequence[str] = ()
    hub_repo: str | None = None
    repo_type: str = "model"
    prefix: str | None = None
    local_store: Path | None = None
    expect: Sequence[str] = ()
    budget: float = 0.0
    commit: str | None = None
    idempotency_key: str | None = None
    waivers: Sequence[str] = ()
    preflight_digest: str | None = None
    resume_from: str | None = None  # an hf:// URI (resolve a job id first: `resolve_resume`)
    max_restarts: int = 0
    env: Sequence[str] = ()  # NAME=VALUE
    notify: Sequence[str] = ()  # NAME[:STATE,...] (worker.notify)
    capacity_wait: str | None = None  # a duration; the spec's default when None
    code: CodeSpec | None = None  # the repository shipped (producer.code); its commit is `commit`
    secrets: Sequence[str] = ()  # what the job's own processes may read, by name


def read_script(path: Path) -> str:
    """The job script's text, checked (exists, at most 1 MiB, UTF-8 text, passes `bash -n`);
    a sweep reads and checks its script once."""
    if not path.is_file():
        raise UserInputError(f"Job script '{path}' not found: pass the path of a bash script.")
    st = path.stat()
    return _checked_script(path.resolve(), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=32)
def _checked_script(path: Path, size: int, _mtime_ns: int) -> str:

    if size > MAX_SCRIPT_BYTES:
        raise UserInputError(
            f"Job script '{path}' is {size} bytes; the limit is 1 MiB. Stage data on the Hub "
            "and declare it with --hub-input instead of embedding it."
        )
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise UserInputError(f"Job script '{path}' is not UTF-8 text.") from None
    if "\x00" in text:
        raise UserInputError(f"Job script '{path}' is binary, not a bash script.")
    if not text.strip():
        raise UserInputError(f"Job script '{path}' is empty: it is what the job runs.")
    from worker.session.checks import bash_syntax_error

    if problem := bash_syntax_error(path):
        first = problem.splitlines()[0]
        raise UserInputError(f"Job script '{path}' fails `bash -n`: {first}")
    return text


def _duration(option: str, text: str) -> float:
    try:
        return parse_duration_s(text)
    except ValueError as exc:
        raise UserInputError(f"{option}: {exc}.") from None


def _inputs(given: Sequence[str]) -> dict[str, str]:
    inputs = pairs("--hub-input", given, "NAME=URI")
    for name, uri in inputs.items():
        if problem := uri_problem(uri):
            raise UserInputError(f"--hub-input {name}: {problem}.")
    return inputs


@functools.lru_cache(maxsize=32)
def git_commit(cwd: Path) -> str:
    try:
        res = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return res.stdout.strip() if res.returncode == 0 else ""


def default_idempotency_key(spec_fields: dict[str, object]) -> str:
    """Same run name, commit, script and settings -> same key: a double submit is one job."""
    h = hashlib.sha256()
    for k in sorted(spec_fields):
        h.update(f"{k}={spec_fields[k]!r}\n".encode())
    return h.hexdigest()[:32]


_SYSTEM_DIRS = ("/proc", "/sys", "/dev", "/run")


def local_store_problem(path: Path) -> str | None:
    """Why results cannot be kept in the folder `path` on this machine, or None."""
    return _local_store(path)[0]


def _local_store(path: Path) -> tuple[str | None, Path]:
    """(the problem or None, the resolved folder); a sweep's jobs share one folder, so the
    answer is kept while the folder (or its absence) and the working folder stay the same."""
    try:
        st = path.stat()
        seen: tuple[int, ...] = (st.st_ino, st.st_mode, st.st_mtime_ns)
    except OSError:
        seen = ()
    return _local_store_at(str(path), os.getcwd(), seen)


@functools.lru_cache(maxsize=32)
def _local_store_at(path: str, _cwd: str, _seen: tuple[int, ...]) -> tuple[str | None, Path]:
    p = Path(path).resolve()
    return _store_problem(Path(path), p), p


def _store_problem(path: Path, p: Path) -> str | None:
    if any(p == Path(d) or Path(d) in p.parents for d in _SYSTEM_DIRS):
        return f"{path} is inside a system folder"
    if p.exists() and not p.is_dir():
        return f"{path} is not a folder"
    existing = next(q for q in (p, *p.parents) if q.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable"
    return None


def _dest(req: SubmitRequest) -> ArtifactDest:
    prefix = req.prefix if req.prefix is not None else req.run_name
    if req.local_store is not None and req.hub_repo:
        raise UserInputError("Give one place for results: --hub-repo or --local-store, not both.")
    if req.local_store is not None:
        problem, folder = _local_store(req.local_store)
        if problem:
            raise UserInputError(f"--local-store: {problem}; name a folder you can write.")
        return ArtifactDest(kind="local", repo=str(folder), prefix=prefix)
    if req.hub_repo:
        return ArtifactDest.model_validate(
            {"kind": "hf", "repo": req.hub_repo, "repo_type": req.repo_type, "prefix": prefix}
        )
    raise UserInputError(
        "Name where results go: --hub-repo USER/REPO (Hub) or --local-store DIR (a rehearsal)."
    )


def destination_of(req: SubmitRequest) -> ArtifactDest:
    """Where the job's results (and a shipped snapshot) go, checked."""
    try:
        return _dest(req)
    except ValidationError as exc:
        raise UserInputError(f"Invalid destination: {spec_error(exc)}.") from None


_submitter = whoami  # user@host; not cached: one process may act as several users (tests do)


def build_spec(req: SubmitRequest, *, now: datetime | None = None) -> JobSpec:
    script = read_script(req.script)
    if not re.fullmatch(RUN_NAME_PATTERN, req.run_name) or len(req.run_name) > 96:
        raise UserInputError(
            f"Invalid job: run_name {req.run_name!r} must be letters, digits, '.', '_' or '-' "
            "(at most 96), safe as a path and Hub path segment."
        )
    gpus = [g.strip().upper() for g in req.gpu.split(",")]
    for gpu in gpus:
        if gpu not in Gpu.__members__:
            raise UserInputError(
                f"--gpu {req.gpu!r}: {gpu or 'an empty name'} is not a Colab GPU type; use one "
                f"or several of {', '.join(Gpu)} (A100,L4: the first Colab can serve)."
            )
    if len(set(gpus)) != len(gpus):
        raise UserInputError(f"--gpu {req.gpu!r} names a GPU type twice.")
    wall = _duration("--wall", req.wall)
    if wall < MIN_WALL_S:
        raise UserInputError(
            f"--wall {req.wall} is too short: at least {MIN_WALL_S // 60}m, to leave room for "
            "allocation, uploads, the job and its final sync."
        )
    if wall > MAX_WALL_S:
        raise UserInputError(
            f"--wall {req.wall} is over {MAX_WALL_S // 3600}h, about the longest a Colab session "
            "lasts: split the run into jobs that resume (--resume-from, --max-restarts)."
        )
    ttl = _duration("--ttl", req.ttl) if req.ttl is not None else default_ttl_s(wall)
    dest = destination_of(req)
    if req.code is not None:
        commit = req.code.commit
    else:
        commit = req.commit if req.commit is not None else git_commit(req.script.parent.resolve())
    fields: dict[str, object] = {
        "run_name": req.run_name,
        "commit": commit,
        "script": script,
        "script_name": req.script.name,
        "hub_inputs": _inputs(req.hub_inputs),
        "gpu": gpus[0],
        "high_mem": req.high_mem,
        "wall_cap_s": wall,
        "idle_timeout_s": _duration("--idle", req.idle),
        "sync_interval_s": _duration("--sync-interval", req.sync_interval),
        "sync_paths": tuple(req.sync_paths),
        "ttl_s": ttl,
        "artifact": dest,
        "expected_artifacts": tuple(req.expect),
        "budget_units": req.budget,
        "waivers": tuple(req.waivers),
        "preflight_digest": req.preflight_digest,
        "resume_from": req.resume_from,
        "max_restarts": req.max_restarts,
        "env": pairs("--env", req.env, "NAME=VALUE"),
    }
    if len(gpus) > 1:
        fields["gpu_fallback"] = tuple(gpus[1:])
    if req.notify:
        from worker.notify.targets import parse_notify

        for text in req.notify:
            parse_notify(text)  # one line naming what is wrong
        fields["notify"] = tuple(dict.fromkeys(t.strip() for t in req.notify))
    if req.code is not None:
        fields["code"] = req.code
    if req.secrets:
        fields["secrets"] = tuple(dict.fromkeys(req.secrets))
    if req.gpu_idle is not None:
        fields["gpu_idle_s"] = _duration("--gpu-idle", req.gpu_idle)
    if req.capacity_wait is not None:
        wait = _duration("--capacity-wait", req.capacity_wait)
        if not 0 < wait <= MAX_CAPACITY_WAIT_S:
            raise UserInputError(
                f"--capacity-wait {req.capacity_wait}: between 1s and "
                f"{MAX_CAPACITY_WAIT_S / 86400:.0f} days."
            )
        fields["capacity_wait_s"] = wait
    key = req.idempotency_key or default_idempotency_key(fields)
    try:
        spec = JobSpec(
            job_id=secrets.token_hex(8),
            idempotency_key=key,
            submitted_at=now or datetime.now(UTC),
            submitted_from=socket.gethostname(),
            submitted_by=_submitter(),
            **fields,
        )
    except ValidationError as exc:
        err = spec_error(exc)
        raise UserInputError(f"Invalid job: {err}.") from None
    # An expected artifact no sync path uploads would fail the job after its GPU time is spent.
    if uncovered := find_uncovered(spec.expected_artifacts, spec.sync_paths):
        raise UserInputError(uncovered_advice(uncovered, spec.sync_paths))
    return spec


@dataclass(frozen=True)
class Enqueued:
    job_id: str
    created: bool
    state: JobState


@dataclass(frozen=True)
class Batch:
    """What the gate did with a submission: each job (new, or submitted before) and the
    sweep's id ('' for none)."""

    jobs: list[Enqueued]
    sweep: str = ""


def enqueue(
    spec: JobSpec, ledger: Ledger, *, allow_same_run: bool = False, wait_s: float = 60.0
) -> Enqueued:
    """Have the gate record the job and send its message (`enqueue_many`)."""
    return enqueue_many([spec], ledger, allow_same_run=allow_same_run, wait_s=wait_s).jobs[0]


def enqueue_many(
    specs: Sequence[JobSpec],
    ledger: Ledger,
    *,
    allow_same_run: bool = False,
    sweep: bool = False,
    max_parallel: int = 0,
    after: Sequence[Sequence[Dep]] = (),
    wait_s: float = 60.0,
) -> Batch:
    """Ask the gate (`worker.gate`) to record every job in one atomic step (all or none) and
    send the new ones' messages; one request, however many jobs. A known idempotency key sends
    nothing; a live job writing to the same destination refuses the batch unless
    `allow_same_run`. The gate gives each job its id (in the Redis user's namespace under ACLs)
    and, to a sweep's points (`sweep`, or several jobs without dependencies), a sweep id."""
    from producer.ask import ask

    body = Submit(
        specs=tuple(specs), after=tuple(tuple(a) for a in after) if any(after) else (),
        sweep=sweep, max_parallel=max_parallel, allow_same_run=allow_same_run,
    )  # fmt: skip
    done = ask(ledger, body, Submitted, wait_s=wait_s)
    return Batch([Enqueued(j.job_id, j.created, j.state) for j in done.jobs], done.sweep)


__all__ = [
    "Batch", "Enqueued", "SpecError", "SubmitRequest", "build_spec", "enqueue", "enqueue_many",
]  # fmt: skip


def check_output_repo(spec: JobSpec, settings: Settings, token: str | None = None) -> str:
    """Pre-flight for a Hub destination, on `settings.hub_endpoint()` with this machine's token
    (`token`, else huggingface_hub's login): the repo exists or can be created private, is
    private, and the token can write. Returns what it saw; raises a UserInputError naming the
    check when it fails (nothing is enqueued)."""
    if spec.artifact.kind != "hf":
        return "local destination: not a Hub repo"
    from producer.stage import find_hub_token
    from worker.errors import StoreError
    from worker.store.hub import HubStore

    endpoint = settings.hub_endpoint()
    token = token or find_hub_token()
    if token is None:
        return "output repo not checked here (no Hub token on this machine); the worker checks it"
    try:
        return HubStore(endpoint, token).check_output_repo(spec.artifact).detail
    except StoreError as exc:
        raise UserInputError(f"Pre-flight failed (output-repo): {exc.advice()}") from None
