"""The tracker run of a job: its reference, the environment the job gets, how it is closed.

Where the tracker allows it, colabq decides the run's id before the job starts, so the janitor
can find the run again when the job dies without closing it:

- MLflow: the worker creates the run (the job's experiment, tagged `colabq.job_id`) and the job
  gets `MLFLOW_RUN_ID`, which `mlflow.start_run()` resumes;
- W&B: the run id is the job id (`WANDB_RUN_ID`, `WANDB_RESUME=allow`), so every segment of a
  restarted job logs to the same run, and nothing needs W&B to be reachable at start.

The reference is recorded on the job (`tracker_run`: "mlflow:<run id>" or
"wandb:<entity>/<project>/<run id>"). Credentials are files named in the settings of the host
that calls the tracker; they never reach the job's environment, Redis or a log line. Opening a
run and a host's clients, which need the two trackers' modules (each built on this one), are
`clients.py`'s.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from worker.errors import ColabqError, TrackerError
from worker.settings import Settings
from worker.states import JobState

MLFLOW = "mlflow"
WANDB = "wandb"
KINDS = (MLFLOW, WANDB)
JOB_TAG = "colabq.job_id"  # MLflow tag naming the job that opened the run
REASON_TAG = "colabq.reason"
STATE_TAG = "colabq.state"
MAX_REASON = 500  # a reason is a line for people, not a log
_USERINFO = re.compile(r"(\w+://)[^/@\s]+@")


@dataclass(frozen=True)
class TrackerRef:
    """A run colabq opened, as recorded on its job."""

    kind: str  # MLFLOW or WANDB
    run_id: str
    entity: str | None = None  # W&B only
    project: str | None = None  # W&B only

    def __str__(self) -> str:
        if self.kind == WANDB and self.entity and self.project:
            return f"{WANDB}:{self.entity}/{self.project}/{self.run_id}"
        return f"{self.kind}:{self.run_id}"

    @classmethod
    def parse(cls, text: str) -> TrackerRef | None:
        kind, sep, rest = text.partition(":")
        if not sep or kind not in KINDS or not rest:
            return None
        if kind == WANDB and rest.count("/") == 2:
            entity, project, run_id = rest.split("/")
            return cls(kind, run_id, entity or None, project or None)
        return cls(kind, rest)


class Ending(StrEnum):
    """How a ghost run is closed (MLflow's run statuses)."""

    FINISHED = "FINISHED"
    FAILED = "FAILED"
    KILLED = "KILLED"


def ending_for(state: JobState) -> Ending:
    """A succeeded job's run finished; a cancelled one's was killed; every other end failed."""
    if state is JobState.SUCCEEDED:
        return Ending.FINISHED
    if state is JobState.CANCELLED:
        return Ending.KILLED
    return Ending.FAILED


class TrackerRuns(Protocol):
    """What the janitor needs of a tracker."""

    def status(self, ref: TrackerRef) -> str | None:
        """The run's state in the tracker's own words ("RUNNING", "running"...); None: no such
        run (deleted, or never created)."""
        ...

    def is_running(self, status: str) -> bool: ...

    def finish(
        self, ref: TrackerRef, ending: Ending, *, job_id: str, state: str, reason: str
    ) -> str:
        """Close a run its job left running; returns what was done, for the report."""
        ...

    def delete(self, ref: TrackerRef) -> str: ...


@dataclass(frozen=True)
class OpenedRun:
    ref: TrackerRef
    experiment_id: str | None = None  # MLflow


def wandb_run_id(job_id: str) -> str:
    """W&B run ids are [a-z0-9]; a job id already is (and so every segment resumes the run)."""
    return job_id


def run_env(ref: TrackerRef, job_id: str, settings: Settings) -> dict[str, str]:
    """What the job's environment on the VM gets for its run: ids, names and URLs, never a
    credential (a tracking URI that carries one is left out)."""
    if ref.kind == MLFLOW:
        env = {"MLFLOW_RUN_ID": ref.run_id}
        uri = settings.mlflow_tracking_uri
        if uri and not carries_secret(uri):
            env["MLFLOW_TRACKING_URI"] = uri
        return env
    env = {"WANDB_RUN_ID": ref.run_id, "WANDB_RESUME": "allow", "WANDB_TAGS": f"colabq-{job_id}"}
    if ref.entity:
        env["WANDB_ENTITY"] = ref.entity
    if ref.project:
        env["WANDB_PROJECT"] = ref.project
    return env


def carries_secret(uri: str) -> bool:
    """A URL with a user, a password or a query (tokens hide there) is not given to the job."""
    parts = urllib.parse.urlsplit(uri)
    return bool(parts.username or parts.password or parts.query)


def read_credential(path: Path) -> str:
    """A tracker credential from its 0600 file, in this process's memory only."""
    from worker.session.checks import check_token_file

    try:
        check_token_file(path)
        value = path.read_text().strip()
    except (ColabqError, OSError) as exc:
        raise TrackerError(f"tracker credential: {exc}") from None
    if not value:
        raise TrackerError(f"tracker credential: {path} is empty")
    return value


def scrub(text: str, secrets: Iterable[str | None]) -> str:
    """`text` with every secret (and a URL's user:password) replaced, for errors and logs."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return _USERINFO.sub(r"\1***@", text)


def bounded(reason: str) -> str:
    return reason if len(reason) <= MAX_REASON else reason[: MAX_REASON - 1] + "…"
