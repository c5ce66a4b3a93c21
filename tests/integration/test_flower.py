"""A real Flower, on the real Redis, through its HTTP API: each job's phase while it runs (custom
task events that never reuse Celery's names), SUCCESS only for a job that succeeded and FAILURE
with the reason otherwise, the run name instead of the spec, a login always, and its state kept
across a restart."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from producer.broker import free_port
from producer.cli import app
from tests.integration.conftest import Fleet
from worker.states import JobState

pytestmark = pytest.mark.integration


AUTH = ("ops", "flower-test-password")


def start_flower(fleet: Fleet, port: int) -> subprocess.Popen[bytes]:
    auth = fleet.root / "flower-auth"
    if not auth.exists():
        auth.write_text(f"{AUTH[0]}:{AUTH[1]}\n")
        auth.chmod(0o600)
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "colabq"), "flower", f"--port={port}",
         "--address=127.0.0.1"],
        env={**fleet.env, "COLABQ_FLOWER_AUTH_FILE": str(auth),
             "COLABQ_FLOWER_DB": str(fleet.root / "flower.db")},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def get(url: str, *, auth: tuple[str, str] | None = AUTH) -> Any:
    req = urllib.request.Request(url)
    if auth:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.loads(resp.read())


def fetch(url: str) -> str:
    token = base64.b64encode(f"{AUTH[0]}:{AUTH[1]}".encode()).decode()
    req = urllib.request.Request(url, headers={"Authorization": f"Basic {token}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return str(resp.read().decode(errors="replace"))


def wait_up(url: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            get(f"{url}/api/workers")
            return
        except OSError:
            time.sleep(0.3)
    raise AssertionError("flower did not start")


def wait_events(url: str) -> None:
    """Until Flower's event consumer has seen the fleet's worker (its heartbeats): a job sent
    before that would have its task-received event, and with it its args, missed."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any(w.get("status") for w in get(f"{url}/workers?json=1").get("data", [])):
            return
        time.sleep(0.5)
    raise AssertionError("flower saw no worker event")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()  # Flower saves its state on a clean stop
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture
def flower(fleet: Fleet) -> Iterator[str]:
    port = free_port()
    proc = start_flower(fleet, port)
    url = f"http://127.0.0.1:{port}"
    wait_up(url)
    wait_events(url)
    try:
        yield url
    finally:
        stop(proc)


def task(url: str, task_id: str) -> dict[str, Any]:
    return dict(get(f"{url}/api/tasks").get(task_id) or {})


def submit(fleet: Fleet, script: str, name: str) -> str:
    path = fleet.root / f"{name}.sh"
    path.write_text(script)
    result = CliRunner().invoke(
        app,
        ["submit", str(path), "--name", name, "--wall", "10m",
         "--local-store", str(fleet.root / "store"), "--json",
         "--waive", "config-diff", "--waive", "paths", "--waive", "monitoring"],
        env=fleet.env,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return str(json.loads(result.output)["jobs"][0]["job_id"])


def watch(url: str, job_id: str) -> list[str]:
    seen: list[str] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        state = task(url, job_id).get("state")
        if state and (not seen or seen[-1] != state):
            seen.append(str(state))
        if state in ("SUCCESS", "FAILURE"):
            break
        time.sleep(0.2)
    return seen


def test_flower_shows_the_jobs_phase_then_the_truth_about_its_end(
    fleet: Fleet, flower: str
) -> None:
    good = submit(fleet, "echo phase-test\nsleep 4\n", "mnist-mlp-bs64-lr1e-3-flower")
    seen = watch(flower, good)
    assert fleet.ledger.get(good).state is JobState.SUCCEEDED
    assert "RUNNING" in seen, seen  # the job's phase, not Celery's STARTED
    assert seen[-1] == "SUCCESS", seen
    info = task(flower, good)
    assert "mnist-mlp-bs64-lr1e-3-flower" in info["args"] and "gpu=T4" in info["args"]
    assert "phase-test" not in json.dumps(info)  # never the spec or the script
    table = "/tasks/datatable?draw=1&start=0&length=50&order[0][column]=0&columns[0][data]=name"
    for page in ("/", "/tasks", f"/task/{good}", "/workers", "/api/tasks", "/api/workers",
                 f"/api/task/info/{good}", table):  # fmt: skip
        body = fetch(f"{flower}{page}")
        assert "phase-test" not in body, page  # a marker planted in the script: on no page
    assert "mnist-mlp-bs64-lr1e-3-flower" in fetch(f"{flower}{table}")  # the list shows the job
    # Flower's own /metrics stays, for Prometheus beside `colabq metrics` (it needs no login).
    with urllib.request.urlopen(f"{flower}/metrics", timeout=10) as resp:
        assert 'task="colabq.run_job"' in resp.read().decode()

    bad = submit(fleet, "echo about-to-fail\nexit 3\n", "mnist-mlp-bs64-lr1e-3-exit3")
    seen = watch(flower, bad)
    assert fleet.ledger.get(bad).state is JobState.FAILED
    assert seen[-1] == "FAILURE", seen
    info = task(flower, bad)
    assert "FAILED (exit code 3)" in str(info.get("exception")), info
    failed = get(f"{flower}/api/tasks?state=FAILURE")
    assert bad in failed and good not in failed


def test_flower_refuses_without_a_login_and_keeps_its_state(fleet: Fleet) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_flower(fleet, port)
    try:
        wait_up(url)
        with pytest.raises(urllib.error.HTTPError) as refused:
            get(f"{url}/api/tasks", auth=None)
        assert refused.value.code == 401
        with pytest.raises(urllib.error.HTTPError):
            get(f"{url}/api/tasks", auth=("ops", "wrong"))
        job_id = submit(fleet, "echo kept\n", "mnist-mlp-bs64-lr1e-3-kept")
        assert watch(url, job_id)[-1] == "SUCCESS"
    finally:
        stop(proc)
    proc = start_flower(fleet, port)  # a restarted Flower remembers what it saw
    try:
        wait_up(url)
        assert task(url, job_id).get("state") == "SUCCESS"
    finally:
        stop(proc)


def test_flower_shows_a_running_jobs_progress(fleet: Fleet, flower: str) -> None:
    """The run's progress (issue 27) on its job page: the task's `result` while it runs."""
    from tests.integration.test_progress_on_vm import tqdm_job

    job_id = submit(fleet, tqdm_job(40, 0.5), "mnist-mlp-bs64-lr1e-3-progress")
    deadline = time.monotonic() + 90
    shown = ""
    while time.monotonic() < deadline and "ETA" not in shown:
        shown = str(task(flower, job_id).get("result") or "")
        time.sleep(0.3)
    assert shown.startswith("progress: ") and "/40 it)" in shown and "ETA" in shown, shown
    assert task(flower, job_id).get("state") == "RUNNING"
    assert "progress: " in fetch(f"{flower}/task/{job_id}")  # the job's page
    assert fleet.wait_terminal(job_id, timeout_s=120) is JobState.SUCCEEDED
