"""A job that logs to MLflow, through the real worker and the emulated VM: the worker opens the
job's run on a real `mlflow server`, the job sees its id as `MLFLOW_RUN_ID`, and the run its
script never closed is closed by the next janitor pass (`colabq janitor`, as beat runs it)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

from tests.integration.conftest import Fleet
from tests.integration.test_run_on_vm import submit
from worker.states import JobState

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("mlflow")]


@pytest.fixture
def fleet_env_extra(mlflow_uri: str) -> dict[str, str]:
    return {"COLABQ_MLFLOW_TRACKING_URI": mlflow_uri, "COLABQ_MLFLOW_EXPERIMENT": "colabq-it"}


def test_the_job_logs_to_the_run_colabq_opened_and_the_janitor_closes_it(
    fleet: Fleet,
    mlflow_uri: str,
) -> None:
    job_id = submit(
        fleet, 'echo "run=$MLFLOW_RUN_ID uri=$MLFLOW_TRACKING_URI"\n', "--tracker", "mlflow"
    )
    fleet.wait_state(job_id, JobState.SUCCEEDED, timeout_s=120)
    rec = fleet.ledger.get(job_id)
    assert rec.spec.tracker == "mlflow"
    ref = rec.get("tracker_run")
    assert ref is not None and ref.startswith("mlflow:")
    run_id = ref.removeprefix("mlflow:")
    assert f"run={run_id} uri={mlflow_uri}" in fleet.output(job_id)
    # Opened before `colab new`: a slow or unreachable tracker costs no GPU time.
    said = [ln.text for ln in fleet.ledger.read_log(job_id, count=1000)]
    opened = next(i for i, t in enumerate(said) if f"tracker run {ref}" in t)
    allocating = next(i for i, t in enumerate(said) if "allocating T4" in t)
    assert opened < allocating, said
    client = MlflowClient(tracking_uri=mlflow_uri)
    run = client.get_run(run_id)
    assert run.data.tags["colabq.job_id"] == job_id and run.info.run_name == rec.spec.run_name
    assert client.get_experiment(run.info.experiment_id).name == "colabq-it"
    assert run.info.status == "RUNNING"  # the script never closed it

    res = subprocess.run(
        [sys.executable, "-m", "producer.cli", "janitor", "--act", "--json"],
        env=fleet.other_host("beat") | {"COLABQ_MLFLOW_TRACKING_URI": mlflow_uri},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    [row] = [r for r in json.loads(res.stdout)["rows"] if r["subject"] == ref]
    assert row["did"] == "did: finish FINISHED", row
    closed = client.get_run(run_id)
    assert closed.info.status == "FINISHED" and closed.data.tags["colabq.state"] == "SUCCEEDED"
