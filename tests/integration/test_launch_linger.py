"""The launch cell's `colab exec` outlives its cell (the real client's slow exit): the runner goes
on once the LAUNCHED sentinel is read, and what happens to the lingering client, or to the VM,
in that window is judged by the job on the VM, not by the client's death. Through a real Celery
worker and the emulator's `linger_s`."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable

import pytest

from tests.integration.conftest import Fleet
from tests.integration.test_runner_faults import report, submit
from worker.session.procs import find_job_processes, is_exec_client
from worker.states import JobState

pytestmark = pytest.mark.integration
# Far longer than any test: the client is still lingering whenever the test looks.
LINGER = json.dumps({"linger_s": 600, "times": 1})
LINES = 60


def launch_clients(fleet: Fleet, job_id: str) -> list[int]:
    """The job's `colab exec` clients of its launch cell (`-f .../launch-<segment>.py`)."""
    return [
        pid
        for pid, argv in find_job_processes(fleet.job_dir(job_id))
        if is_exec_client(argv) and any(os.path.basename(a).startswith("launch-") for a in argv)
    ]


def test_launch_client_killed_while_it_lingers_job_succeeds_with_every_line(
    fleet: Fleet,
) -> None:
    # The first exec of this emulator is the job's launch cell.
    assert fleet.emu("faults", "set", "exec", LINGER).returncode == 0
    script = f'for i in $(seq 1 {LINES}); do echo "line-$i"; sleep 0.1; done\n'
    job_id = submit(fleet, script)
    # The runner reads the sentinel and goes on: RUNNING while the client still lingers.
    fleet.wait_state(job_id, JobState.RUNNING, timeout_s=180)
    clients = launch_clients(fleet, job_id)
    assert len(clients) == 1, "the launch client lingers on, 600 s"
    os.killpg(clients[0], signal.SIGKILL)  # the OOM killer, a restart
    assert fleet.wait_terminal(job_id, timeout_s=240) is JobState.SUCCEEDED
    assert fleet.output(job_id) == [f"line-{i}" for i in range(1, LINES + 1)]
    history = fleet.ledger.history(job_id)
    assert [h.state for h in history].count(JobState.RUNNING) == 1
    assert report(fleet, job_id)["remaining_endpoint"] is None
    assert fleet.exec_processes(job_id) == []


def test_vm_unassigned_while_the_launch_client_lingers_is_vm_lost(fleet: Fleet) -> None:
    assert fleet.emu("faults", "set", "exec", LINGER).returncode == 0
    job_id = submit(fleet, "echo started\nsleep 300\n")
    fleet.wait_state(job_id, JobState.RUNNING, timeout_s=180)
    assert len(launch_clients(fleet, job_id)) == 1
    endpoint = fleet.ledger.get(job_id).get("endpoint")
    assert endpoint
    res = fleet.emu("unassign", endpoint)  # Colab reclaims the VM
    assert res.returncode == 0, res.stderr
    assert fleet.wait_terminal(job_id, timeout_s=240) is JobState.VM_LOST
    reason = fleet.ledger.get(job_id).reason
    assert "the VM was lost" in reason, reason
    # Every exec client of the job, the lingering one included, was killed.
    assert fleet.exec_processes(job_id) == []
    assert "resubmit" in report(fleet, job_id)["next_action"]


def test_launch_client_killed_before_its_cell_ran_launches_once_more(fleet: Fleet) -> None:
    # The first launch client stalls before it sends its cell (`delay_s`), and is killed there.
    delay = json.dumps({"delay_s": 600, "times": 1})
    assert fleet.emu("faults", "set", "exec", delay).returncode == 0
    job_id = submit(fleet, 'for i in $(seq 1 5); do echo "line-$i"; done\n')
    wait_until(lambda: json.loads(fleet.emu("faults", "list").stdout) == [], "fault taken")
    clients = launch_clients(fleet, job_id)
    assert len(clients) == 1
    os.killpg(clients[0], signal.SIGKILL)
    assert fleet.wait_terminal(job_id, timeout_s=240) is JobState.SUCCEEDED
    assert fleet.output(job_id) == [f"line-{i}" for i in range(1, 6)]
    logged = [ln.text for ln in fleet.ledger.read_log(job_id, count=10_000)]
    assert any("launching again (once)" in t for t in logged), logged


def wait_until(predicate: Callable[[], bool], what: str, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached in {timeout_s} s")
        time.sleep(0.1)
