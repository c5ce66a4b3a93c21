"""The run lives on the VM: exec clients, VMs, workers and Redis fail under it, and it still ends
right. A real Celery worker drives the Colab emulator, which behaves as the spec says the real
CLI does (a lost VM hangs an attached exec until its --timeout; an abandoned exec writes its
record back on exit)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
from typer.testing import CliRunner

from producer.cli import app
from tests.integration.conftest import Fleet
from worker.states import TERMINAL, JobState

pytestmark = pytest.mark.integration
runner = CliRunner()
NO_SESSIONS = "[colab] No active sessions found on server."
RUN = "mnist-mlp-bs64-lr1e-3-vm"
WAIVE = ["--waive", "config-diff", "--waive", "paths", "--waive", "monitoring"]
POLL_S = 0.5  # the fleet's watchdog poll


def numbered(n: int, pause_s: float = 0.05, then: str = "") -> str:
    """A job that prints line-1 .. line-N, so that every line can be counted once."""
    return f'for i in $(seq 1 {n}); do echo "line-$i"; sleep {pause_s}; done\n{then}'


def submit(fleet: Fleet, script: str, *extra: str, wall: str = "12h") -> str:
    path = fleet.root / "job.sh"
    path.write_text(script)
    result = runner.invoke(
        app,
        ["submit", str(path), "--name", RUN, "--wall", wall, "--idle", "5s",
         "--local-store", str(fleet.root / "store"), "--json", *WAIVE, *extra],
        env=fleet.env,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return str(json.loads(result.output)["jobs"][0]["job_id"])


def wait_for(cond: Callable[[], object], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def client_pid(fleet: Fleet, job_id: str) -> int | None:
    try:
        d = json.loads((fleet.job_dir(job_id) / "runner.json").read_text())
    except (OSError, ValueError):
        return None
    return int(d["client"]["pid"]) if d.get("client") else None


def kill_client(fleet: Fleet, job_id: str) -> int:
    pid = client_pid(fleet, job_id)
    assert pid is not None
    os.killpg(pid, signal.SIGKILL)  # the attach client and its `colab exec`, as a crash would
    return pid


def assert_each_line_once(fleet: Fleet, job_id: str, n: int) -> None:
    lines = [ln for ln in fleet.output(job_id) if ln.startswith("line-")]
    assert lines == [f"line-{i}" for i in range(1, n + 1)], lines


def assert_clean(fleet: Fleet, job_id: str) -> None:
    """Nothing left: no session on the account, no exec of the job, no record written back."""
    assert fleet.colab("sessions").stdout.strip() == NO_SESSIONS
    assert fleet.exec_processes(job_id) == []
    assert fleet.cli_records(job_id) == {}


def endpoint_of(fleet: Fleet, job_id: str) -> str:
    wait_for(lambda: fleet.ledger.get(job_id).get("endpoint"), "an endpoint recorded")
    return str(fleet.ledger.get(job_id).get("endpoint"))


# --- the exec client dies; the job does not -----------------------------------------------------


@pytest.mark.parametrize("when", ["at start", "mid-run", "during the final sync"])
def test_exec_client_killed_the_job_succeeds_with_every_line_once(fleet: Fleet, when: str) -> None:
    n = 60
    job_id = submit(fleet, numbered(n, then="mkdir -p ckpt && echo w > ckpt/m.pt\n"),
                    "--sync", "ckpt", "--expect", "ckpt")  # fmt: skip
    if when == "at start":
        wait_for(lambda: client_pid(fleet, job_id), "an attach client")
        kill_client(fleet, job_id)
    elif when == "mid-run":
        wait_for(lambda: "line-20" in fleet.output(job_id), "line-20 forwarded")
        kill_client(fleet, job_id)
    else:
        # The final sync is slowed by the store's folder being replaced by a slow copy: kill the
        # client the moment the job's exit is forwarded, before its final upload is.
        wait_for(
            lambda: fleet.ledger.read_watch(job_id).get("exec_exit") is not None,
            "the job's exit forwarded",
        )
        if fleet.ledger.read_watch(job_id).get("exec_end") is None:
            kill_client(fleet, job_id)
    assert fleet.wait_terminal(job_id) is JobState.SUCCEEDED, fleet.ledger.get(job_id).reason
    assert_each_line_once(fleet, job_id, n)
    assert fleet.ledger.get(job_id).get("exit_code") == "0"
    wait_for(lambda: fleet.exec_processes(job_id) == [], "no exec of the job left")
    assert_clean(fleet, job_id)


def test_a_dropped_connection_is_noticed_and_the_client_replaced(fleet: Fleet) -> None:
    n = 150
    job_id = submit(fleet, numbered(n, pause_s=0.1))
    ep = endpoint_of(fleet, job_id)
    wait_for(lambda: "line-10" in fleet.output(job_id), "line-10 forwarded")
    first = client_pid(fleet, job_id)
    assert fleet.emu("drop-connections", ep).returncode == 0  # the websocket drops; VM lives
    assert fleet.wait_terminal(job_id, timeout_s=120) is JobState.SUCCEEDED
    assert client_pid(fleet, job_id) != first
    assert_each_line_once(fleet, job_id, n)
    assert any("connection is gone" in ln.text for ln in fleet.ledger.read_log(job_id))
    assert_clean(fleet, job_id)


# --- the VM goes away ----------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["unassigned", "stopped elsewhere"])
def test_lost_vm_ends_vm_lost_within_a_poll_not_at_the_wall_cap(fleet: Fleet, how: str) -> None:
    job_id = submit(fleet, numbered(2000, pause_s=0.1))
    ep = endpoint_of(fleet, job_id)
    wait_for(lambda: "line-5" in fleet.output(job_id), "line-5 forwarded")
    lost_at = time.monotonic()
    if how == "unassigned":  # preempted or reclaimed: the server drops it
        assert fleet.emu("unassign", ep).returncode == 0
    else:  # the user stopped it from another machine
        probe = fleet.root / "elsewhere.json"
        name = str(fleet.ledger.get(job_id).get("session"))
        probe.write_text(json.dumps({name: {"name": name, "token": "", "url": "", "endpoint": ep,
                                            "token_expires_at": None}}))  # fmt: skip
        res = fleet.run_colab("--config", str(probe), "stop", "-s", name)
        assert res.returncode == 0, res.stdout + res.stderr
    assert fleet.wait_terminal(job_id, timeout_s=60) is JobState.VM_LOST
    took = time.monotonic() - lost_at
    assert took <= POLL_S + 30, took
    rec = fleet.ledger.get(job_id)
    assert "VM was lost" in rec.reason and "last synced" in rec.reason
    report = json.loads(rec.get("report") or "{}")
    assert "--resume-from" in report["next_action"]
    wait_for(lambda: fleet.exec_processes(job_id) == [], "no exec of the job left", 20)
    assert_clean(fleet, job_id)


def test_lost_vm_with_a_restart_resumes_from_the_checkpoint_and_succeeds(fleet: Fleet) -> None:
    script = (
        'if [ -n "${COLABQ_RESUME_FROM:-}" ]; then\n'
        '  echo "resumed from $(cat $COLABQ_RESUME_FROM/step)"; exit 0\n'
        "fi\n"
        "mkdir -p ckpt && echo 7 > ckpt/step\n"
        'echo "checkpoint written"\n'
        "sleep 300\n"
    )
    job_id = submit(fleet, script, "--sync", "ckpt", "--max-restarts", "1", "--sync-interval", "1s")
    ep = endpoint_of(fleet, job_id)
    wait_for(lambda: "checkpoint written" in fleet.output(job_id), "the checkpoint")
    ckpt = fleet.root / "store" / RUN / "ckpt" / "step"
    wait_for(ckpt.exists, "the checkpoint synced", 30)
    assert fleet.emu("unassign", ep).returncode == 0
    assert fleet.wait_terminal(job_id, timeout_s=90) is JobState.SUCCEEDED
    states = [h.state for h in fleet.ledger.history(job_id)]
    assert JobState.RESTARTING in states
    assert "resumed from 7" in fleet.output(job_id)
    rec = fleet.ledger.get(job_id)
    assert rec.get("restarts") == "1"
    assert_held_is_billed(fleet, job_id, assignments=2)  # both segments count
    assert_clean(fleet, job_id)


def assert_held_is_billed(
    fleet: Fleet, job_id: str, *, assignments: int, slack_s: float = 0.0
) -> None:
    """The job's held time (what its report charges) is what the emulator billed, every
    assignment closed, within the latency of the `colab new` and `colab stop` calls (and
    `slack_s` more where Redis was away when the clock should have stopped)."""
    bills = fleet.billing()
    assert len(bills) == assignments and all(b["unassigned_at"] for b in bills), bills
    billed_s = sum(float(str(b["seconds"])) for b in bills)
    report = json.loads(fleet.ledger.get(job_id).get("report") or "{}")
    gap = report["duration"]["held_s"] - billed_s
    assert -10 * assignments <= gap <= 10 * assignments + slack_s, (report, bills)


# --- the worker dies -----------------------------------------------------------------------------


def test_worker_sigkilled_and_restarted_takes_its_job_back(fleet: Fleet) -> None:
    n = 80
    job_id = submit(fleet, numbered(n, pause_s=0.1, then="exit 0\n"))
    wait_for(lambda: "line-10" in fleet.output(job_id), "line-10 forwarded")
    fleet.kill_worker()
    time.sleep(1)
    fleet.restart_worker()
    assert fleet.wait_terminal(job_id, timeout_s=90) is JobState.SUCCEEDED
    rec = fleet.ledger.get(job_id)
    assert rec.get("exit_code") == "0"
    report = json.loads(rec.get("report") or "{}")
    assert report["outcome"] == "succeeded" and report["remaining_endpoint"] is None
    assert_each_line_once(fleet, job_id, n)
    assert len(fleet.billing()) == 1  # nothing allocated twice
    assert_held_is_billed(fleet, job_id, assignments=1)  # the clock ran on through the kill
    assert_clean(fleet, job_id)


def test_host_lost_the_job_is_adopted_from_another_host_and_succeeds(fleet: Fleet) -> None:
    n = 60
    job_id = submit(fleet, numbered(n, pause_s=0.1))
    wait_for(lambda: "line-10" in fleet.output(job_id), "line-10 forwarded")
    fleet.lose_host()
    time.sleep(4)  # the lease (3 s here) expires
    res = subprocess.run(
        [sys.executable, "-m", "producer.cli", "adopt", job_id],
        env=fleet.other_host(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert fleet.ledger.get(job_id).state is JobState.SUCCEEDED
    assert_each_line_once(fleet, job_id, n)
    assert len(fleet.billing()) == 1
    assert fleet.colab("sessions").stdout.strip() == NO_SESSIONS


# --- cancel, whatever the phase ------------------------------------------------------------


def _cancel(fleet: Fleet, job_id: str) -> None:
    res = runner.invoke(app, ["cancel", job_id, "--reason", "wrong lr"], env=fleet.env)
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("phase", ["allocating", "starting", "running", "persisting"])
def test_cancel_at_each_phase_ends_cancelled_and_leaves_nothing(fleet: Fleet, phase: str) -> None:
    slow = {"allocating": "new", "starting": "upload", "persisting": "stop"}.get(phase)
    if slow:
        fleet.emu("faults", "set", slow, json.dumps({"delay_s": 3, "times": 1}))
    job_id = submit(
        fleet, "echo started-long-job\nsleep 300\n" if phase != "persisting" else "true\n"
    )
    target = JobState(phase if phase != "persisting" else "persisting")
    wait_for(
        lambda: (
            target in [h.state for h in fleet.ledger.history(job_id)]
            or fleet.ledger.get(job_id).state in TERMINAL
        ),
        f"state {target}",
    )
    _cancel(fleet, job_id)
    assert fleet.wait_terminal(job_id) is JobState.CANCELLED, fleet.ledger.get(job_id).reason
    assert "wrong lr" in fleet.ledger.get(job_id).reason
    time.sleep(15 if phase == "running" else 2)  # a real exec would write back after its end
    assert_clean(fleet, job_id)


def test_cancel_with_the_worker_killed_mid_release_ends_cancelled(fleet: Fleet) -> None:
    fleet.emu("faults", "set", "stop", json.dumps({"delay_s": 4, "times": 1}))
    job_id = submit(fleet, "echo started-long-job\nsleep 300\n")
    wait_for(lambda: "started-long-job" in fleet.output(job_id), "the job running")
    _cancel(fleet, job_id)
    fleet.wait_state(job_id, JobState.RELEASING)
    fleet.kill_worker()
    fleet.restart_worker()
    assert fleet.wait_terminal(job_id, timeout_s=90) is JobState.CANCELLED
    time.sleep(15)
    assert_clean(fleet, job_id)


# --- money -------------------------------------------------------------------------------------


def test_zero_balance_refuses_allocation_with_the_default_budget(fleet: Fleet) -> None:
    fleet.emu("set-balance", "0")
    job_id = submit(fleet, "echo never\n")
    assert fleet.wait_terminal(job_id) is JobState.FAILED_BUDGET
    assert fleet.ledger.get(job_id).get("session") is None
    assert fleet.billing() == []  # no `colab new`
