"""A real Flower, on the real Redis, shows each job's phase (not only STARTED/SUCCESS): the runner's
state changes reach it as custom task events."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from producer.broker import free_port
from producer.cli import app
from tests.integration.conftest import Fleet
from worker.states import JobState

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def flower(fleet: Fleet) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "worker.celery_app", "flower",
         f"--port={port}", "--address=127.0.0.1", f"--conf={ROOT / 'ops' / 'flowerconfig.py'}"],
        env={**fleet.env, "FLOWER_UNAUTHENTICATED_API": "true"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/api/workers", timeout=2).read()
            break
        except OSError:
            time.sleep(0.3)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def task_state(url: str, task_id: str) -> str | None:
    with urllib.request.urlopen(f"{url}/api/tasks", timeout=5) as resp:
        tasks = json.loads(resp.read())
    info = tasks.get(task_id)
    return info.get("state") if info else None


def test_flower_shows_the_jobs_phase_then_its_end(fleet: Fleet, flower: str) -> None:
    script = fleet.root / "job.sh"
    script.write_text("echo phase-test\nsleep 4\n")
    result = CliRunner().invoke(
        app,
        ["submit", str(script), "--name", "mnist-mlp-bs64-lr1e-3-flower", "--wall", "10m",
         "--local-store", str(fleet.root / "store"), "--json",
         "--waive", "config-diff", "--waive", "paths", "--waive", "monitoring"],
        env=fleet.env,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    job_id = json.loads(result.output)["job_id"]
    seen: list[str] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        state = task_state(flower, job_id)
        if state and (not seen or seen[-1] != state):
            seen.append(state)
        if state == "SUCCESS":
            break
        time.sleep(0.2)
    assert fleet.ledger.get(job_id).state is JobState.SUCCEEDED
    assert "RUNNING" in seen, seen  # the job's phase, not Celery's STARTED
    assert seen[-1] == "SUCCESS", seen
