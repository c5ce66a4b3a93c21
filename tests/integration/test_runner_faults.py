"""The session runner under failure, through a real Celery worker and the Colab emulator."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from producer.cli import app
from tests.integration.conftest import Fleet
from worker.states import JobState

pytestmark = pytest.mark.integration
runner = CliRunner()
NO_SESSIONS = "[colab] No active sessions found on server."
RUN = "mnist-mlp-bs64-lr1e-3-faults"


def submit(fleet: Fleet, script: str, *extra: str, store: Path | None = None) -> str:
    path = fleet.root / "job.sh"
    path.write_text(script)
    result = runner.invoke(
        app,
        ["submit", str(path), "--name", RUN, "--wall", "10m", "--idle", "5s",
         "--local-store", str(store or fleet.root / "store"), "--json",
         "--waive", "config-diff", "--waive", "paths", "--waive", "monitoring", *extra],
        env=fleet.env,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return str(json.loads(result.output)["jobs"][0]["job_id"])


def report(fleet: Fleet, job_id: str) -> dict:
    return json.loads(fleet.ledger.get(job_id).get("report") or "{}")


def wait_for_log(fleet: Fleet, job_id: str, text: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(text in ln.text for ln in fleet.ledger.read_log(job_id)):
            return
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared in the log of {job_id}")


def test_cancel_from_a_second_process_ends_cancelled_with_session_gone(fleet: Fleet) -> None:
    job_id = submit(fleet, "echo started-long-job\nsleep 300\n")
    wait_for_log(fleet, job_id, "started-long-job")
    # A second process: the colabq command itself, as another machine would run it.
    res = subprocess.run(
        [sys.executable, "-m", "producer.cli", "cancel", job_id, "--reason", "wrong lr"],
        env=fleet.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert fleet.wait_terminal(job_id) is JobState.CANCELLED
    assert "wrong lr" in fleet.ledger.get(job_id).reason
    assert report(fleet, job_id)["remaining_endpoint"] is None
    assert fleet.colab("sessions").stdout.strip() == NO_SESSIONS


def test_first_upload_fails_job_never_runs_and_session_is_released(fleet: Fleet) -> None:
    # The run's folder in the store is a file (submit checks only the store itself): the
    # wrapper's first upload cannot succeed.
    store = fleet.root / "store"
    store.mkdir()
    (store / RUN).write_text("x")
    marker = fleet.root / "job-ran"
    job_id = submit(fleet, f"touch {marker}\n", store=store)
    assert fleet.wait_terminal(job_id) is JobState.FAILED
    assert "first upload failed" in fleet.ledger.get(job_id).reason
    assert not marker.exists()
    assert fleet.colab("sessions").stdout.strip() == NO_SESSIONS


def final_upload_breaker(store: Path) -> str:
    # The job itself makes the store unwritable after the first upload, as a Hub outage would.
    target = store / RUN
    return (
        "mkdir -p ckpt && echo weights > ckpt/model.pt\n"
        f"mv {target} {target}.gone && echo blocked > {target}\n"
        "echo job-finished\n"
    )


def test_final_upload_fails_vm_kept_results_downloaded_then_released(fleet: Fleet) -> None:
    store = fleet.share() / "store"  # the job's (unprivileged) user breaks it
    store.mkdir()
    store.chmod(0o777)
    job_id = submit(fleet, final_upload_breaker(store), "--sync", "ckpt", store=store)
    assert fleet.wait_terminal(job_id) is JobState.FAILED
    rec = fleet.ledger.get(job_id)
    states = [h.state for h in fleet.ledger.history(job_id)]
    assert JobState.RETAINED in states
    assert "final upload failed" in rec.reason
    rep = report(fleet, job_id)
    local = rep["results_local"].split(":", 1)[1]
    assert (Path(local) / "ckpt" / "model.pt").read_text() == "weights\n"
    assert (Path(local) / "logs" / "exit_code").read_text().strip() == "0"
    assert rep["remaining_endpoint"] is None and "results are on" in rep["next_action"]
    assert fleet.colab("sessions").stdout.strip() == NO_SESSIONS


def test_worker_sigkilled_mid_run_watchdog_recovers_and_ends_the_session(fleet: Fleet) -> None:
    store = fleet.share() / "store"  # the job's (unprivileged) user breaks it
    store.mkdir()
    store.chmod(0o777)
    # The job outlasts the kill below even on a loaded host (the log line can lag seconds there).
    script = "echo running\nsleep 15\n" + final_upload_breaker(store)
    job_id = submit(fleet, script, "--sync", "ckpt", store=store)
    wait_for_log(fleet, job_id, "running")
    fleet.kill_worker()
    killed_at = time.monotonic()
    # Bounds: the job's 15 s, then the idle timeout (5 s) and a poll; generous for a slow CI.
    deadline = killed_at + 90
    while time.monotonic() < deadline:
        # The watchdog records its verified stop just after the session disappears.
        if fleet.ledger.read_watch(job_id).get("gone_verified_at"):
            break
        time.sleep(0.5)
    assert fleet.colab("sessions").stdout.strip() == NO_SESSIONS
    watch = fleet.ledger.read_watch(job_id)
    assert watch.get("stop_verified") == "true", watch
    results = Path(fleet.env["COLABQ_STATE_DIR"]) / "jobs" / job_id / "results"
    assert (results / "ckpt" / "model.pt").read_text() == "weights\n"
    # The dead worker's lease expires; the janitor settles the job from what was recorded.
    assert fleet.ledger.get(job_id).state is JobState.RUNNING
    time.sleep(4)
    res = runner.invoke(app, ["janitor", "--act"], env=fleet.env)
    assert res.exit_code == 0, res.output
    rec = fleet.ledger.get(job_id)
    assert rec.state is JobState.FAILED, res.output
    assert "recovered the results" in rec.reason


def test_cli_killed_after_writing_its_record_the_vm_is_adopted_by_name(fleet: Fleet) -> None:
    # The CLI dies after writing its record (before `Session READY.`): not the job's failure.
    # The record names the VM (`worker/session/reconcile.py`): the job goes on with it.
    fleet.emu("faults", "set", "new", json.dumps({"kill_after": "state", "times": 1}))
    job_id = submit(fleet, "echo ran-on-the-adopted-vm\n")
    assert fleet.wait_terminal(job_id) is JobState.SUCCEEDED, fleet.ledger.get(job_id).reason
    rec = fleet.ledger.get(job_id)
    [assigned] = fleet.billing()
    assert rec.get("endpoint") == assigned["endpoint"], "one VM: the one the CLI recorded"
    assert "ran-on-the-adopted-vm" in fleet.output(job_id)
    assert fleet.colab("sessions").stdout.strip() == NO_SESSIONS


def test_cli_killed_before_writing_state_assignment_is_never_touched(fleet: Fleet) -> None:
    fleet.emu("faults", "set", "new", json.dumps({"kill_after": "assign", "times": 1}))
    job_id = submit(fleet, "echo after-a-retry\n")
    # A `colab new` killed under the worker is the host's failure, not the job's: the job goes
    # back to the queue (the worker drains, probes healthy, takes it again) and runs.
    assert fleet.wait_terminal(job_id, timeout_s=120) is JobState.SUCCEEDED
    reasons = [h.reason for h in fleet.ledger.history(job_id)]
    assert any(r.startswith("put back by") and "colab new" in r for r in reasons), reasons
    # The assignment the killed CLI made has no record: reported, never stopped.
    listed = fleet.colab("sessions").stdout.strip().splitlines()
    assert len(listed) == 1 and listed[0].startswith("[?] ")
    orphan = listed[0].split()[1]
    logged = [ln.text for ln in fleet.ledger.read_log(job_id, count=1000)]
    assert any(f"no CLI record names: {orphan} (T4)" in ln for ln in logged), logged


def test_balance_below_budget_fails_before_allocation_and_buys_nothing(fleet: Fleet) -> None:
    fleet.emu("set-balance", "1.5")
    job_id = submit(fleet, "echo never\n", "--budget", "5")
    assert fleet.wait_terminal(job_id) is JobState.FAILED_BUDGET
    rec = fleet.ledger.get(job_id)
    assert "1.50 compute units" in rec.reason and "never buys" in rec.reason
    assert rec.get("session") is None
    assert fleet.colab("sessions").stdout.strip() == NO_SESSIONS
    assert "Current balance: 1.50" in fleet.colab("usage").stdout
