"""Workers say what they serve: `colabq workers` lists each live worker with its host, GPU
types, busy or idle, the job it holds and its last beat; a worker that stops is gone."""

from __future__ import annotations

import json
import os
import signal

import pytest
from click.testing import Result
from typer.testing import CliRunner

from producer.cli import app
from tests.integration.conftest import Fleet
from tests.integration.test_run_on_vm import submit, wait_for
from worker.states import JobState

pytestmark = pytest.mark.integration
runner = CliRunner()


def cards(fleet: Fleet) -> list[dict[str, object]]:
    res = runner.invoke(app, ["workers", "--json"], env=fleet.env)
    assert res.exit_code == 0, res.output
    return list(json.loads(res.output))


def test_workers_lists_each_worker_busy_with_its_job_then_idle(fleet: Fleet) -> None:
    wait_for(lambda: cards(fleet), "the worker's card")
    [card] = cards(fleet)
    assert card["gpus"] == ["T4"] and card["busy"] is False and card["job_id"] is None
    job_id = submit(fleet, "sleep 4\necho done\n")
    wait_for(lambda: fleet.ledger.get(job_id).state is JobState.RUNNING, "running")
    wait_for(lambda: cards(fleet)[0]["job_id"] == job_id, "the card names its job", 15)
    assert cards(fleet)[0]["busy"] is True
    table = runner.invoke(app, ["workers"], env=fleet.env).output
    assert "BUSY" in table and job_id in table.replace("\n", "")
    fleet.wait_terminal(job_id)
    wait_for(lambda: cards(fleet)[0]["busy"] is False, "idle again", 15)
    os.killpg(fleet.proc.pid, signal.SIGTERM)  # a worker that stops says so
    fleet.proc.wait(timeout=30)
    assert cards(fleet) == []


def test_submit_warns_when_no_live_worker_serves_the_jobs_gpu(fleet: Fleet) -> None:
    wait_for(lambda: cards(fleet), "the worker's card")
    served = json.loads(submit_json(fleet, "--gpu", "T4").output)
    assert served["jobs"][0]["live_workers"] == 1 and served["warnings"] == []
    unserved = json.loads(submit_json(fleet, "--gpu", "A100", "--name", "other-run-a100").output)
    assert unserved["jobs"][0]["live_workers"] == 0
    assert "no live worker serves" in unserved["warnings"][0]
    text = submit_text(fleet, "--gpu", "A100", "--name", "third-run-a100")
    assert text.exit_code == 0 and "warning: no live worker serves" in text.output


def test_a_second_live_job_of_the_same_run_is_refused_with_the_live_one_named(
    fleet: Fleet,
) -> None:
    first = json.loads(submit_json(fleet, script="sleep 5\n").output)["jobs"][0]["job_id"]
    again = submit_json(fleet, script="echo again\n")
    assert again.exit_code == 2, again.output
    assert first in again.output and "--allow-same-run" in again.output
    assert "Traceback" not in again.output
    allowed = submit_json(fleet, "--allow-same-run", script="echo allowed\n")
    assert allowed.exit_code == 0, allowed.output
    assert fleet.wait_terminal(first) is JobState.SUCCEEDED


def submit_json(fleet: Fleet, *extra: str, script: str = "echo hi\n") -> Result:
    return submit_text(fleet, "--json", *extra, script=script)


def submit_text(fleet: Fleet, *extra: str, script: str = "echo hi\n") -> Result:
    path = fleet.root / f"job-{len(list(fleet.root.glob('job-*.sh')))}.sh"
    path.write_text(script)
    return runner.invoke(
        app,
        ["submit", str(path), "--name", "mnist-mlp-bs64-lr1e-3-cards", "--wall", "10m",
         "--local-store", str(fleet.root / "store"), "--waive", "config-diff", "--waive",
         "paths", "--waive", "monitoring", *extra],
        env=fleet.env,
    )  # fmt: skip
