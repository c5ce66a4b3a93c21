"""`colabq submit --code git` and `--code snapshot` end to end: the producer checks and ships a
uv project's commit (fetched from its file:// remote, or staged into the local store), a real
worker runs it on the emulator, and the job prints exactly the submitted commit from the
project's .venv under `uv run --no-sync`, SUCCEEDED."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ops.uvproject import build_uv_project
from producer.cli import app
from tests.integration.conftest import Fleet
from worker.states import JobState

pytestmark = pytest.mark.integration
runner = CliRunner()
WAIVE = ["--waive", "config-diff", "--waive", "paths", "--waive", "monitoring"]
# uv never reaches the network: the producer's `uv lock --check` and the VM's `uv sync --frozen`
# both resolve from the project's own wheels/.
OFFLINE = {"UV_OFFLINE": "1", "UV_PYTHON_DOWNLOADS": "never"}
JOB = """\
echo "head: $(git rev-parse HEAD 2>/dev/null || cat .colabq-commit)"
echo "python: $(python -c 'import sys; print(sys.prefix)')"
"""


def test_a_uv_project_submitted_with_code_git_and_snapshot_runs_its_commit(
    fleet: Fleet, tmp_path: Path
) -> None:
    project = build_uv_project(tmp_path / "project", files={"job.sh": JOB})
    env = [f"--env={k}={v}" for k, v in OFFLINE.items()]  # the VM's uv sync, offline too
    jobs = {}
    for mode in ("git", "snapshot"):
        result = runner.invoke(
            app,
            ["submit", str(project.root / "job.sh"), "--repo-dir", str(project.root),
             "--code", mode, "--name", f"mnist-mlp-uv-{mode}", "--idle", "5s",
             "--local-store", str(tmp_path / "store"), "--json", *WAIVE, *env],
            env={**fleet.env, **OFFLINE},
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        (row,) = json.loads(result.stdout)["jobs"]
        assert row["code"]["commit"] == project.commit
        jobs[mode] = row["job_id"]
    assert jobs.keys() == {"git", "snapshot"}
    for mode, job_id in jobs.items():
        assert fleet.wait_terminal(job_id, timeout_s=120) is JobState.SUCCEEDED, (
            mode, fleet.ledger.get(job_id).reason
        )  # fmt: skip
        out = fleet.output(job_id)
        assert f"head: {project.commit}" in out, (mode, out)
        assert any(ln.startswith("python: ") and ln.endswith("/repo/.venv") for ln in out), out
