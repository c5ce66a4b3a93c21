"""The fleet survives its members: a host whose Colab login breaks, a state dir that breaks,
and Colab saying "not now". Real workers on the real Redis, driving the emulator.

- A broken host never fails a job: the job goes back to the queue untouched, the worker drains
  (`colabq workers` says why) and the healthy worker runs every job.
- A capacity refusal is a wait: the job is tried again with backoff and succeeds; with fallback
  types (`--gpu A100,L4`) an attempt tries them in order.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from producer.cli import app
from tests.integration.conftest import Fleet, start_worker, stop_worker
from tests.integration.test_run_on_vm import submit, wait_for
from worker.states import JobState

pytestmark = pytest.mark.integration
runner = CliRunner()


@pytest.fixture
def fleet_env_extra() -> dict[str, str]:
    # Seconds, not minutes: the capacity backoff and the drained worker's probes.
    return {"COLABQ_CAPACITY_BACKOFF_S": "0.5", "COLABQ_CAPACITY_BACKOFF_MAX_S": "2",
            "COLABQ_DRAIN_PROBE_S": "1", "COLABQ_DRAIN_PROBE_MAX_S": "4"}  # fmt: skip


@pytest.fixture
def second_host(fleet: Fleet) -> Iterator[tuple[dict[str, str], list[subprocess.Popen[bytes]]]]:
    env = fleet.other_host("host2")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        yield env, procs
    finally:
        for p in procs:
            stop_worker(p)


def workers(fleet: Fleet) -> list[dict[str, object]]:
    res = runner.invoke(app, ["workers", "--json"], env=fleet.env)
    assert res.exit_code == 0, res.output
    return list(json.loads(res.output))


def drained(fleet: Fleet) -> list[dict[str, object]]:
    return [w for w in workers(fleet) if w["state"] == "drained"]


def set_fault(fleet: Fleet, command: str, **fields: object) -> None:
    res = fleet.emu("faults", "set", command, json.dumps(fields))
    assert res.returncode == 0, res.stderr


def test_a_host_whose_login_breaks_is_drained_and_every_job_succeeds(
    fleet: Fleet, second_host: tuple[dict[str, str], list[subprocess.Popen[bytes]]]
) -> None:
    env2, procs = second_host
    procs.append(start_worker(env2, fleet.root / "worker2.log"))
    # Host 2's login expires after it started: every authenticated call of its CLI gets 401.
    set_fault(fleet, "auth", fail=True, mode="http", match_home=env2["HOME"])
    jobs = [
        submit(fleet, f"echo job-{i}\n", "--name", f"mnist-mlp-bs64-lr1e-3-login{i}")
        for i in range(8)
    ]
    wait_for(lambda: len(drained(fleet)) == 1, "the broken worker shown drained", timeout_s=90)
    for job in jobs:
        assert fleet.wait_terminal(job, timeout_s=240) is JobState.SUCCEEDED
    [bad] = drained(fleet)
    assert "credentials" in str(bad["drain_reason"]) or "401" in str(bad["drain_reason"])
    assert int(str(bad["failures_in_row"])) >= 1 and bad["drained_by_hand"] is False
    put_back = [j for j in jobs if fleet.ledger.get(j).get("putbacks")]
    assert put_back, "the broken worker took a job and gave it back"
    for job in put_back:
        [attempt] = json.loads(fleet.ledger.get(job).get("putbacks") or "[]")
        assert attempt["cause"] == "host" and attempt["worker"] == bad["name"]
        states = [h.state for h in fleet.ledger.history(job)]
        assert JobState.FAILED not in states and states[-1] is JobState.SUCCEEDED
    # Its login repaired, the drained worker probes healthy and takes jobs again.
    fleet.emu("faults", "clear", "auth")
    wait_for(lambda: not drained(fleet), "the repaired worker undrained", timeout_s=60)


def test_a_broken_state_dir_strands_no_job(
    fleet: Fleet, second_host: tuple[dict[str, str], list[subprocess.Popen[bytes]]]
) -> None:
    env2, procs = second_host
    procs.append(start_worker(env2, fleet.root / "worker2.log"))
    # After it started, host 2's state dir stops being usable: its jobs folder is now a file.
    jobs_dir = Path(env2["COLABQ_STATE_DIR"]) / "jobs"
    shutil.rmtree(jobs_dir, ignore_errors=True)
    jobs_dir.write_text("not a folder")
    jobs = [
        submit(fleet, f"echo job-{i}\n", "--name", f"mnist-mlp-bs64-lr1e-3-state{i}")
        for i in range(5)
    ]
    for job in jobs:
        assert fleet.wait_terminal(job, timeout_s=240) is JobState.SUCCEEDED
    [bad] = drained(fleet)
    assert "state dir" in str(bad["drain_reason"])


def test_colab_new_refused_twice_the_job_waits_and_succeeds(fleet: Fleet) -> None:
    set_fault(fleet, "new", http=412, times=2)
    job = submit(fleet, "echo after-the-wait\n", "--name", "mnist-mlp-bs64-lr1e-3-wait")
    assert fleet.wait_terminal(job, timeout_s=120) is JobState.SUCCEEDED
    rec = fleet.ledger.get(job)
    reasons = [h.reason for h in fleet.ledger.history(job)]
    assert any("waiting for a GPU: T4 refused 1x" in r for r in reasons), reasons
    assert any("waiting for a GPU: T4 refused 2x" in r for r in reasons), reasons
    assert rec.get("capacity_refusals") == "2"
    assert "after-the-wait" in fleet.output(job)


def test_capacity_wait_over_ends_failed_no_gpu(fleet: Fleet) -> None:
    set_fault(fleet, "new", http=412)
    job = submit(
        fleet, "echo never\n", "--name", "mnist-mlp-bs64-lr1e-3-nogpu", "--capacity-wait", "3s"
    )
    assert fleet.wait_terminal(job, timeout_s=120) is JobState.FAILED_NO_GPU
    assert "refused" in fleet.ledger.get(job).reason
    assert not any(b.get("unassigned_at") is None for b in fleet.billing())  # nothing held


def test_a_fallback_gpu_serves_the_job_when_the_first_is_refused(fleet: Fleet) -> None:
    prefix = fleet.env["COLABQ_QUEUE_PREFIX"]
    env = {**fleet.env, "COLABQ_WORKER_GPUS": "A100,L4"}
    log = fleet.root / "worker-a100-l4.log"
    argv = [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker",
            "-Q", f"{prefix}gpu.a100,{prefix}gpu.l4", "-c", "1",
            "-n", f"test-{secrets.token_hex(3)}@%h", "-l", "INFO", "-E"]  # fmt: skip
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
    try:
        wait_for(lambda: b"ready." in log.read_bytes(), "the A100/L4 worker ready", timeout_s=60)
        set_fault(fleet, "new", http=400, times=1)  # the A100 request: accelerator rejected
        job = submit(
            fleet, "echo on-l4\n", "--name", "mnist-mlp-bs64-lr1e-3-fb", "--gpu", "A100,L4"
        )
        assert fleet.wait_terminal(job, timeout_s=120) is JobState.SUCCEEDED
        rec = fleet.ledger.get(job)
        assert rec.get("gpu") == "L4"
        assert [b["accelerator"] for b in fleet.billing()] == ["L4"]
        res = runner.invoke(app, ["status", job, "--json"], env=fleet.env)
        shown = json.loads(res.output)
        assert shown["gpu"] == "L4" and shown["gpus"] == ["A100", "L4"]
    finally:
        stop_worker(proc)
        time.sleep(0)


def test_a_vm_with_another_gpu_is_released_at_once_and_the_job_waits_for_its_own(
    fleet: Fleet,
) -> None:
    set_fault(fleet, "new", serve_gpu="L4", times=1)  # Colab serves an L4 for the T4 asked
    job = submit(fleet, "echo on-a-t4\n", "--name", "mnist-mlp-bs64-lr1e-3-mismatch")
    assert fleet.wait_terminal(job, timeout_s=120) is JobState.SUCCEEDED
    reasons = [h.reason for h in fleet.ledger.history(job)]
    assert any("T4 (the VM had NVIDIA L4) refused 1x" in r for r in reasons), reasons
    billing = fleet.billing()
    assert [b["accelerator"] for b in billing] == ["L4", "T4"]
    assert all(b["unassigned_at"] is not None for b in billing), "no VM left assigned"
    assert fleet.output(job) == ["on-a-t4"], "the job ran once, on the right GPU"
    held = float(fleet.ledger.get(job).get("held_s") or 0)
    billed = sum(float(b["seconds"]) for b in billing)
    assert 0 < held <= billed + 2, "both sessions' held time counted, as billed"
