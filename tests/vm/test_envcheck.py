"""The environment check on the VM, run as the code stage runs it (`uv run --no-sync python
colabq_envcheck.py` in a project synced with `uv sync --frozen`), against each of the seed's
known breakages built offline: a torch built for a newer CUDA than the driver, TensorFlow's NCCL
where torch's should be, the system pytest picked up. Each is named with its repair; repaired
only when opted in, in the .venv alone (uv.lock and pyproject.toml unchanged)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ops.uvproject import UvProject, build_uv_project, find_uv, git
from tests.vm.conftest import VM, fake_smi


def synced(project: UvProject, tmp: Path) -> dict[str, str]:
    """`uv sync --frozen` offline; the environment the check then runs in: the host venv's
    pytest on PATH (the "system" one), uv's find-links from the environment too (a repair
    that ignores the project's uv settings still finds the wheels)."""
    env = {
        **os.environ, "UV_OFFLINE": "1", "UV_PYTHON_DOWNLOADS": "never",
        "UV_CACHE_DIR": str(tmp / "uv-cache"), "UV_FIND_LINKS": str(project.root / "wheels"),
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
    }  # fmt: skip
    env.pop("VIRTUAL_ENV", None)
    subprocess.run([find_uv(), "sync", "--frozen", "-q"], cwd=project.root, env=env, check=True)
    return env


def check(project: UvProject, env: dict[str, str], smi: Path, *repairs: str) -> dict[str, Any]:
    argv = [find_uv(), "run", "--no-sync", "python", str(VM / "colabq_envcheck.py"),
            "--uv", find_uv(), "--smi", str(smi)]  # fmt: skip
    for name in repairs:
        argv += ["--repair", name]
    done = subprocess.run(
        argv, cwd=project.root, env=env, capture_output=True, text=True, check=True, timeout=120
    )
    return dict(json.loads(done.stdout))


def smi(tmp: Path, cuda: str) -> Path:
    folder = tmp / f"smi-{cuda}"
    folder.mkdir(exist_ok=True)
    fake_smi(folder, cuda)
    return folder / "nvidia-smi"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def broken(tmp_path: Path) -> tuple[UvProject, dict[str, str]]:
    """All three at once: torch for CUDA 12.8, TensorFlow's NCCL by override, pytest in a group
    `uv sync` leaves out."""
    project = build_uv_project(
        tmp_path / "broken", torch_cuda="12.8", tensorflow=True, pytest_group="test"
    )
    return project, synced(project, tmp_path)


def test_each_known_breakage_is_named_with_its_repair_and_not_applied_unasked(
    broken: tuple[UvProject, dict[str, str]], tmp_path: Path
) -> None:
    project, env = broken
    report = check(project, env, smi(tmp_path, "12.4"))
    assert report["driver_cuda"] == "12.4" and report["torch_cuda"] == "12.8"
    found = {b["name"]: b for b in report["breakages"]}
    assert list(found) == ["torch-cuda", "nccl", "pytest"]
    assert "built for CUDA 12.8; the driver runs CUDA 12.4" in found["torch-cuda"]["found"]
    assert found["torch-cuda"]["repair"] == (
        "uv pip install torch==2.5.0+cu124 --index-url https://download.pytorch.org/whl/cu124"
    )
    assert "nvidia-nccl-cu12 2.23.4 is installed but torch" in found["nccl"]["found"]
    assert found["nccl"]["repair"] == "uv pip install --no-config nvidia-nccl-cu12==2.21.5"
    assert f"pytest on PATH is {Path(sys.executable).parent / 'pytest'}" in found["pytest"]["found"]
    assert found["pytest"]["repair"] == "uv pip install pytest==8.3.4"
    assert not any(b["applied"] for b in report["breakages"])


def test_opted_in_repairs_fix_the_venv_only(
    broken: tuple[UvProject, dict[str, str]], tmp_path: Path
) -> None:
    project, env = broken
    lock, manifest = digest(project.root / "uv.lock"), digest(project.root / "pyproject.toml")
    report = check(project, env, smi(tmp_path, "12.4"), "torch-cuda", "nccl", "pytest")
    assert [(b["name"], b["applied"]) for b in report["breakages"]] == [
        ("torch-cuda", True), ("nccl", True), ("pytest", True),
    ]  # fmt: skip
    assert report["torch"] == "2.5.0+cu124" and report["torch_cuda"] == "12.4"
    assert check(project, env, smi(tmp_path, "12.4"))["breakages"] == []  # gone for good
    assert digest(project.root / "uv.lock") == lock
    assert digest(project.root / "pyproject.toml") == manifest
    assert git(project.root, "status", "--porcelain") == ""


@pytest.fixture(scope="module")
def synced_by_cuda(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[UvProject, dict[str, str]]]:
    made = {}
    for cuda in ("12.4", "12.8"):
        tmp = tmp_path_factory.mktemp(f"torch-{cuda}")
        project = build_uv_project(tmp / "p", torch_cuda=cuda)
        made[cuda] = (project, synced(project, tmp))
    return made


@pytest.mark.parametrize(
    ("torch_cuda", "driver", "named"),
    [
        ("12.4", "12.4", []),  # torch for the driver's CUDA
        ("12.4", "12.8", []),  # an older build runs on a newer driver
        ("12.8", None, []),  # no GPU (no nvidia-smi): nothing to compare with
        ("12.8", "11.0", [("torch-cuda", None)]),  # no PyTorch build for a driver this old
    ],
)
def test_torch_cuda_is_named_only_when_torch_is_newer_than_the_driver(
    tmp_path: Path,
    synced_by_cuda: dict[str, tuple[UvProject, dict[str, str]]],
    torch_cuda: str,
    driver: str | None,
    named: list[tuple[str, str | None]],
) -> None:
    # None of these cases changes the environment (nothing is named, or no build can repair
    # it), so each torch build's project is synced once for all of them.
    project, env = synced_by_cuda[torch_cuda]
    tool = smi(tmp_path, driver) if driver else tmp_path / "no-nvidia-smi"
    report = check(project, env, tool, "torch-cuda")
    assert report["driver_cuda"] == driver
    assert [(b["name"], b["repair"]) for b in report["breakages"]] == named


def test_a_project_without_torch_has_nothing_to_report(tmp_path: Path) -> None:
    """No torch at all (the example training repository's case): no CUDA build to compare with
    the driver, no NCCL pin to check; the check reports, nothing is named."""
    plain = (
        '[project]\nname = "plain"\nversion = "0.1.0"\nrequires-python = ">=3.8"\n'
        "dependencies = []\n\n[tool.uv]\npackage = false\n"
    )
    project = build_uv_project(tmp_path / "p", files={"pyproject.toml": plain})
    env = synced(project, tmp_path)
    report = check(project, env, smi(tmp_path, "12.4"), "torch-cuda", "nccl")
    assert report["torch_cuda"] is None and report["python"]
    assert report["breakages"] == []
