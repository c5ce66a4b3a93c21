"""A job from a uv project, through a real worker on the emulator: the VM runs exactly the submitted
commit (`code: git` fetched from a file:// remote, `code: snapshot` unpacked from the local
store), `uv sync --frozen` offline, the job under `uv run --no-sync` in the project's .venv; a
torch built for a newer CUDA than the emulated driver is named in the report with its repair,
and repaired on the VM alone when the job opts in; a `uv sync --frozen` that fails on the VM is
the job's failure, in one line, with the GPU released."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ops.uvproject import UvProject, build_uv_project, commit_all, snapshot_archive
from producer.submit import enqueue
from tests.factories import make_spec
from tests.integration.conftest import Fleet
from worker.spec import ArtifactDest, CodeSpec
from worker.states import JobState

pytestmark = pytest.mark.integration
# The project's lock resolves from its own wheels/: uv never needs the network on the VM.
OFFLINE = {"UV_OFFLINE": "1", "UV_PYTHON_DOWNLOADS": "never"}
WHERE = """\
echo "head: $(git rev-parse HEAD 2>/dev/null || cat .colabq-commit)"
echo "python: $(python -c 'import sys; print(sys.prefix)')"
echo "tree: $(git status --porcelain 2>/dev/null | wc -l) changed"
python train.py
"""


def submit(fleet: Fleet, code: CodeSpec, name: str) -> str:
    spec = make_spec(
        code=code, commit=code.commit, script=WHERE, run_name=f"uv-{name}", env=OFFLINE,
        artifact=ArtifactDest(kind="local", repo=str(fleet.root / "store"), prefix=name),
        sync_paths=("out",), expected_artifacts=("out",),
    )  # fmt: skip
    return enqueue(spec, fleet.ledger).job_id


def report(fleet: Fleet, job_id: str) -> dict[str, Any]:
    return dict(json.loads(fleet.ledger.get(job_id).get("report") or "{}"))


def ran(fleet: Fleet, job_id: str, project: UvProject, torch: str) -> None:
    """The job printed the commit, the project's .venv and the torch it found, and left the
    checkout as committed (uv.lock unchanged)."""
    out = fleet.output(job_id)
    assert f"head: {project.commit}" in out
    assert any(ln.startswith("python: ") and ln.endswith("/repo/.venv") for ln in out), out
    assert f"torch: {torch}" in out
    assert "tree: 0 changed" in out


def test_a_git_job_runs_its_commit_and_the_opted_in_torch_repair_is_applied_on_the_vm(
    fleet: Fleet, tmp_path: Path
) -> None:
    project = build_uv_project(tmp_path / "project", torch_cuda="12.8")
    code = CodeSpec(mode="git", commit=project.commit, remote=project.remote_url, uv=True,
                    python=project.python, repairs=("torch-cuda",))  # fmt: skip
    job_id = submit(fleet, code, "git")
    assert fleet.wait_terminal(job_id) is JobState.SUCCEEDED, fleet.ledger.get(job_id).reason
    ran(fleet, job_id, project, "2.5.0+cu124 cuda: 12.4")  # the driver's build, after the repair
    r = report(fleet, job_id)
    assert r["code"]["on_vm"] is True and r["code"]["commit"] == project.commit
    env = r["environment"]
    assert env["synced"] is True and env["driver_cuda"] == "12.4"
    [torch] = env["breakages"]
    assert torch["name"] == "torch-cuda" and torch["applied"] is True
    assert "built for CUDA 12.8" in torch["found"] and "torch==2.5.0+cu124" in torch["repair"]
    assert (fleet.root / "store" / "git" / "out" / "result.txt").exists()


def test_a_snapshot_job_runs_its_recorded_commit_and_an_unasked_repair_is_only_named(
    fleet: Fleet, tmp_path: Path
) -> None:
    project = build_uv_project(tmp_path / "project", torch_cuda="12.8")
    staged = fleet.root / "store" / "snap" / "code" / f"{project.commit}.tar.gz"
    snapshot_archive(project.root, project.commit, staged)
    code = CodeSpec(mode="snapshot", commit=project.commit, snapshot=staged.as_uri(), uv=True)
    job_id = submit(fleet, code, "snap")
    assert fleet.wait_terminal(job_id) is JobState.SUCCEEDED, fleet.ledger.get(job_id).reason
    ran(fleet, job_id, project, "2.5.0+cu128 cuda: 12.8")  # left as locked
    [torch] = report(fleet, job_id)["environment"]["breakages"]
    assert torch["name"] == "torch-cuda" and torch["applied"] is False
    assert torch["repair"].startswith("uv pip install torch==2.5.0+cu124")


def test_a_lock_uv_cannot_sync_on_the_vm_fails_the_job_in_one_line_and_releases_the_gpu(
    fleet: Fleet, tmp_path: Path
) -> None:
    project = build_uv_project(tmp_path / "project")
    (project.root / "wheels" / "torch-2.5.0+cu124-py3-none-any.whl").unlink()
    broken = commit_all(project, "the wheel the lock names is gone")
    staged = fleet.root / "store" / "broken" / "code" / f"{broken.commit}.tar.gz"
    snapshot_archive(broken.root, broken.commit, staged)
    code = CodeSpec(mode="snapshot", commit=broken.commit, snapshot=staged.as_uri(), uv=True)
    job_id = submit(fleet, code, "broken")
    assert fleet.wait_terminal(job_id) is JobState.FAILED
    reason = fleet.ledger.get(job_id).reason
    assert reason.startswith("the job's environment is not ready: uv sync --frozen failed"), reason
    assert reason.endswith("; the job did not run") and "\n" not in reason
    assert not any(ln.startswith("head: ") for ln in fleet.output(job_id))
    r = report(fleet, job_id)
    assert r["environment"]["synced"] is False and r["runtime"].startswith("released")
    assert all(b["unassigned_at"] is not None for b in fleet.billing())  # nothing still billed
