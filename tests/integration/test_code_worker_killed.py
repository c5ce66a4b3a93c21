"""A `code: git` uv job whose worker is SIGKILLed and restarted, once as the job starts on the
VM (its code stage: fetch, uv sync) and once while it prints: the restarted worker takes it
back, it runs its commit once, every line once, on one VM, SUCCEEDED."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ops.uvproject import build_uv_project
from producer.cli import app
from tests.integration.conftest import Fleet
from tests.integration.test_run_on_vm import wait_for
from worker.states import JobState

pytestmark = pytest.mark.integration
OFFLINE = {"UV_OFFLINE": "1", "UV_PYTHON_DOWNLOADS": "never"}
JOB = 'echo "head: $(git rev-parse HEAD)"\nfor i in $(seq 1 40); do echo line-$i; sleep 0.1; done\n'


@pytest.mark.parametrize("when", ["launched", "running"])
def test_worker_killed_during_a_code_job(fleet: Fleet, tmp_path: Path, when: str) -> None:
    project = build_uv_project(tmp_path / "project", files={"job.sh": JOB})
    result = CliRunner().invoke(
        app,
        [
            "submit",
            str(project.root / "job.sh"),
            "--repo-dir",
            str(project.root),
            "--code",
            "git",
            "--name",
            "mnist-mlp-uv-kill",
            "--idle",
            "20s",
            "--local-store",
            str(tmp_path / "store"),
            "--json",
            "--waive",
            "config-diff",
            "--waive",
            "paths",
            "--waive",
            "monitoring",
            *[f"--env={k}={v}" for k, v in OFFLINE.items()],
        ],
        env={**fleet.env, **OFFLINE},
    )
    assert result.exit_code == 0, result.output
    job_id = json.loads(result.stdout)["jobs"][0]["job_id"]
    if when == "launched":
        wait_for(lambda: fleet.ledger.get(job_id).state is JobState.RUNNING, "running", 60)
    else:
        wait_for(lambda: "line-5" in fleet.output(job_id), "line-5", 60)
    fleet.kill_worker()
    fleet.restart_worker()
    assert fleet.wait_terminal(job_id, timeout_s=120) is JobState.SUCCEEDED, fleet.ledger.get(
        job_id
    ).reason
    out = fleet.output(job_id)
    assert out.count(f"head: {project.commit}") == 1, out
    assert sum(1 for ln in out if ln.startswith("line-")) == 40, out
    assert len(fleet.billing()) == 1
