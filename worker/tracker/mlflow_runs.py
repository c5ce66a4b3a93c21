"""MLflow: open a job's run on the worker, and close a run its job left RUNNING (the janitor).

Through the official client (`mlflow-skinny`, the `mlflow` extra), imported only inside these
calls. The client reads its bearer token from `MLFLOW_TRACKING_TOKEN`; colabq reads the token
from its 0600 file and sets it in this process's environment only for the duration of one call
(under a lock, restored after), so it never reaches a command line, Redis or a log. The same
scope turns the client's own retries off and bounds each request: a tracker outage costs one
short failed call, never a worker's minutes.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from worker.errors import TrackerError
from worker.settings import Settings
from worker.spec import JobSpec
from worker.tracker.runs import (
    JOB_TAG,
    MLFLOW,
    REASON_TAG,
    STATE_TAG,
    Ending,
    OpenedRun,
    TrackerRef,
    bounded,
    read_credential,
    scrub,
)

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

_ENV_LOCK = threading.Lock()
_TOKEN_ENV = "MLFLOW_TRACKING_TOKEN"  # noqa: S105 (a variable's name)
# What one call's scope sets: the token; no retries and a bounded wait; no run URL printed on
# stdout (`colabq janitor --json` prints its report there).
_QUIET = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}
_SCOPED = (_TOKEN_ENV, "MLFLOW_HTTP_REQUEST_TIMEOUT", *_QUIET)
_RUNNING = frozenset({"RUNNING", "SCHEDULED"})


class MlflowRuns:
    def __init__(
        self,
        tracking_uri: str,
        *,
        experiment: str = "colabq",
        token_file: Path | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        self.uri = tracking_uri
        self.experiment = experiment
        self.token_file = token_file
        self.timeout_s = timeout_s

    @classmethod
    def from_settings(cls, settings: Settings) -> MlflowRuns:
        assert settings.mlflow_tracking_uri is not None
        return cls(
            settings.mlflow_tracking_uri,
            experiment=settings.mlflow_experiment,
            token_file=settings.mlflow_token_file,
            timeout_s=settings.tracker_timeout_s,
        )

    @contextmanager
    def _client(self) -> Iterator[MlflowClient]:
        """A client whose calls carry the token and give up quickly; any failure inside becomes
        one TrackerError without the token in it."""
        token = read_credential(self.token_file) if self.token_file is not None else None
        with _ENV_LOCK:
            saved = {name: os.environ.get(name) for name in _SCOPED}
            os.environ.update(_QUIET)
            os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(max(1, math.ceil(self.timeout_s)))
            if token is not None:
                os.environ[_TOKEN_ENV] = token
            try:
                from mlflow.tracking import MlflowClient

                yield MlflowClient(tracking_uri=self.uri)
            except TrackerError:
                raise
            except ImportError:
                raise TrackerError(
                    "MLflow's client is not installed on this host: pip install 'colabq[mlflow]'"
                ) from None
            except Exception as exc:
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise TrackerError(
                    f"MLflow at {scrub(self.uri, [])}: {scrub(first[:300], [token])}"
                ) from None
            finally:
                for name, value in saved.items():
                    if value is None:
                        os.environ.pop(name, None)
                    else:
                        os.environ[name] = value

    def open(self, spec: JobSpec) -> OpenedRun:
        """Create the job's run (its experiment created if missing), tagged with the job id."""
        name = spec.tracker_project or self.experiment
        with self._client() as client:
            exp = client.get_experiment_by_name(name)
            if exp is None:
                try:
                    exp_id = client.create_experiment(name)
                except Exception:  # created meanwhile by another worker
                    again = client.get_experiment_by_name(name)
                    if again is None:
                        raise
                    exp_id = again.experiment_id
            else:
                exp_id = exp.experiment_id
            tags = {JOB_TAG: spec.job_id, "mlflow.runName": spec.run_name}
            if spec.commit:
                tags["mlflow.source.git.commit"] = spec.commit
            run = client.create_run(exp_id, tags=tags, run_name=spec.run_name)
        return OpenedRun(TrackerRef(MLFLOW, run.info.run_id), str(exp_id))

    def status(self, ref: TrackerRef) -> str | None:
        from mlflow.exceptions import MlflowException

        with self._client() as client:
            try:
                run = client.get_run(ref.run_id)
            except MlflowException as exc:
                if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
                    return None
                raise
        if run.info.lifecycle_stage == "deleted":
            return None
        return str(run.info.status)

    def is_running(self, status: str) -> bool:
        return status in _RUNNING

    def finish(
        self, ref: TrackerRef, ending: Ending, *, job_id: str, state: str, reason: str
    ) -> str:
        with self._client() as client:
            tagged = client.get_run(ref.run_id).data.tags.get(JOB_TAG)
            if tagged != job_id:
                # Only a run colabq opened for this very job is ever touched.
                raise TrackerError(f"MLflow run {ref.run_id} is not tagged {JOB_TAG}={job_id}")
            client.set_tag(ref.run_id, STATE_TAG, state)
            client.set_tag(ref.run_id, REASON_TAG, bounded(reason))
            client.set_terminated(ref.run_id, status=ending.value)  # end time: now
        return f"finish {ending.value}"

    def delete(self, ref: TrackerRef) -> str:
        with self._client() as client:
            client.delete_run(ref.run_id)
        return "delete"
