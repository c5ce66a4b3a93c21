"""One job the whole way: `colabq submit` -> Redis -> a real Celery worker -> the Colab emulator
-> back, with the log in `colabq logs` and no session left in `colab sessions`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from producer.cli import app
from tests.integration.conftest import Fleet
from worker.settings import load_settings
from worker.states import JobState
from worker.tasks import execute_job

pytestmark = pytest.mark.integration
runner = CliRunner()


def submit(fleet: Fleet, script: str, *extra: str) -> str:
    path = fleet.root / "job.sh"
    path.write_text(script)
    result = runner.invoke(
        app,
        ["submit", str(path), "--name", "mnist-mlp-bs64-lr1e-3-e2e", "--wall", "10m",
         "--local-store", str(fleet.root / "store"), "--json",
         "--waive", "config-diff", "--waive", "paths", "--waive", "monitoring", *extra],
        env=fleet.env,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return str(json.loads(result.output)["jobs"][0]["job_id"])


def test_job_succeeds_and_its_session_is_gone(fleet: Fleet) -> None:
    job_id = submit(
        fleet,
        "echo 'epoch 1 loss=0.5'\n"
        "mkdir -p ckpt && echo weights > ckpt/model.pt\necho 'train done'\n",
        "--sync", "ckpt", "--expect", "ckpt",
    )  # fmt: skip
    assert fleet.wait_terminal(job_id) is JobState.SUCCEEDED, fleet.ledger.get(job_id).reason

    logs = runner.invoke(app, ["logs", job_id], env=fleet.env)
    assert logs.exit_code == 0
    assert "epoch 1 loss=0.5" in logs.output and "train done" in logs.output

    status = runner.invoke(app, ["status", job_id, "--json"], env=fleet.env)
    data = json.loads(status.output)
    assert data["state"] == "succeeded" and data["exit_code"] == 0
    assert [h["state"] for h in data["history"]] == [
        "queued", "allocating", "starting", "running", "persisting", "releasing", "succeeded",
    ]  # fmt: skip
    assert data["report"]["remaining_endpoint"] is None
    assert (fleet.root / "store" / "mnist-mlp-bs64-lr1e-3-e2e" / "ckpt" / "model.pt").is_file()

    sessions = fleet.colab("sessions")
    assert sessions.returncode == 0
    assert sessions.stdout.strip() == "[colab] No active sessions found on server."


def test_job_exiting_3_fails_with_3_and_is_released(fleet: Fleet) -> None:
    job_id = submit(fleet, "echo about to fail\nexit 3\n")
    assert fleet.wait_terminal(job_id) is JobState.FAILED
    rec = fleet.ledger.get(job_id)
    assert rec.get("exit_code") == "3"
    assert "exited 3" in rec.reason
    report = json.loads(rec.get("report") or "{}")
    assert report["exit_code"] == 3 and report["remaining_endpoint"] is None
    assert fleet.colab("sessions").stdout.strip() == "[colab] No active sessions found on server."


def test_a_job_that_exits_127_says_which_command_was_not_found(fleet: Fleet) -> None:
    """Exit 127 (126): the reason says what could not be run, from what the wrapper saw."""
    job_id = submit(fleet, "echo preparing\nset -e\nfrobnicate-the-weights --all\n")
    assert fleet.wait_terminal(job_id) is JobState.FAILED
    rec = fleet.ledger.get(job_id)
    assert rec.get("exit_code") == "127"
    assert rec.reason.startswith(
        "a command was not found: frobnicate-the-weights (exit 127); install it"
    ), rec.reason
    status = runner.invoke(app, ["status", job_id, "--json"], env=fleet.env)
    assert json.loads(status.output)["report"]["reason"] == rec.reason


def test_logs_follow_streams_lines_while_the_job_runs(fleet: Fleet) -> None:
    job_id = submit(fleet, "echo tick-1\nsleep 4\necho tick-2\n")
    follower = subprocess.Popen(
        [sys.executable, "-m", "producer.cli", "logs", "-f", job_id],
        env=fleet.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert follower.stdout is not None
    seen_running = False
    for line in follower.stdout:
        if line.strip() == "tick-1":
            seen_running = fleet.ledger.get(job_id).state is JobState.RUNNING
            break
    assert seen_running, "tick-1 should arrive while the job still runs"
    rest = follower.stdout.read()
    assert follower.wait(timeout=60) == 0
    assert "tick-2" in rest
    assert fleet.ledger.get(job_id).state is JobState.SUCCEEDED


def test_a_redelivered_message_never_starts_a_second_session(fleet: Fleet) -> None:
    job_id = submit(fleet, "echo started\nsleep 4\n")
    fleet.wait_state(job_id, JobState.RUNNING)
    payload = fleet.ledger.get(job_id).spec.model_dump_json()
    settings = load_settings(
        redis_url=fleet.env["COLABQ_REDIS_URL"], key_prefix=fleet.env["COLABQ_KEY_PREFIX"],
        state_dir=fleet.root / "other-worker", colab_bin=fleet.env["COLABQ_COLAB_BIN"],
    )  # fmt: skip
    dup = execute_job(payload, settings, fleet.ledger, "duplicate-worker")
    assert dup["state"] == "skipped"
    listed = fleet.colab("sessions").stdout.strip().splitlines()
    assert len(listed) == 1
    assert fleet.wait_terminal(job_id) is JobState.SUCCEEDED
    again = execute_job(payload, settings, fleet.ledger, "late-worker")
    assert again["state"] == "succeeded" and again["reason"] == "already terminal"
    assert [h.state for h in fleet.ledger.history(job_id)].count(JobState.ALLOCATING) == 1
