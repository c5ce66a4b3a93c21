"""The scripts that run on the VM, run as the VM runs them: the wrapper started from a folder that
stands for /content (with the bundle's files beside it), a local store, a tiny uv project whose
lock resolves offline (ops/uvproject.py), and an `nvidia-smi` that names the driver's CUDA."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from ops.colab_emulator.image import install_uv
from ops.uvproject import UvProject, build_uv_project
from tests.reachable import reachable_folder

VM = Path(__file__).resolve().parents[2] / "worker" / "vm"
BUNDLED = (
    "colab-job.sh", "colabq_sync.py", "colabq_tree.py", "colabq_code.py", "colabq_envcheck.py",
    "colabq_jobuser.sh", "colabq_inputs.py", "colabq_known_hosts",
)  # fmt: skip
NONCE = "N"


def sentinels(console: str) -> dict[str, str]:
    prefix = f"__COLABQ_{NONCE}_"
    found = {}
    for line in console.splitlines():
        if line.startswith(prefix) and "__=" in line:
            what, value = line[len(prefix) :].split("__=", 1)
            found[what] = value
    return found


@dataclass
class Vm:
    """One emulated /content and the environment the launch cell gives the wrapper."""

    root: Path
    content: Path
    store: Path
    env: dict[str, str]

    def run(
        self, script: str, *args: str, job: str = "j1", ttl_s: int = 60,
        job_args: Sequence[str] = (), to_console: bool = False,
    ) -> Run:  # fmt: skip
        """`to_console`: its output appended to run/console.log, as the launch cell starts it."""
        (self.content / "colab-user-job.sh").write_text(script)
        argv = [
            "bash", str(self.content / "colab-job.sh"), "--job", job, "--nonce", NONCE,
            "--ttl", str(ttl_s), "--dest-kind", "local", "--dest-repo", str(self.store),
            "--prefix", "p", "--heartbeat-s", "1", "--sync-interval", "600", *args,
            "--", "bash", str(self.content / "colab-user-job.sh"), *job_args,
        ]  # fmt: skip
        work = self.content / "colab-jobs" / job
        if to_console:
            (work / "run").mkdir(parents=True, exist_ok=True)
            with open(work / "run" / "console.log", "ab") as console:
                rc = subprocess.run(
                    argv, cwd=self.content, env=self.env, stdout=console,
                    stderr=subprocess.STDOUT, timeout=120, check=False,
                ).returncode  # fmt: skip
            return Run(rc, (work / "run" / "console.log").read_text(errors="replace"), work)
        done = subprocess.run(
            argv, cwd=self.content, env=self.env, capture_output=True, text=True, timeout=120,
            check=False,
        )  # fmt: skip
        return Run(done.returncode, done.stdout + done.stderr, work)


@dataclass(frozen=True)
class Run:
    rc: int
    console: str
    work: Path

    @property
    def sentinels(self) -> dict[str, str]:
        return sentinels(self.console)

    @property
    def job_log(self) -> str:
        return (self.work / "logs" / "job.log").read_text()


def fake_smi(bin_dir: Path, cuda: str) -> None:
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho '| NVIDIA-SMI 550.54.15  Driver Version: 550.54.15  "
                   f"CUDA Version: {cuda} |'\n")  # fmt: skip
    smi.chmod(0o755)


@pytest.fixture
def vm(tmp_path: Path) -> Iterator[Vm]:
    with reachable_folder("colabq-vm-") as root:
        yield make_vm(root, tmp_path)


def make_vm(root: Path, tmp_path: Path) -> Vm:
    content, store, bin_dir = root / "content", tmp_path / "store", root / "bin"
    for folder in (content, store, bin_dir, root / "home"):
        folder.mkdir()
    for name in BUNDLED:
        shutil.copy(VM / name, content / name)
    fake_smi(bin_dir, "12.4")
    # The image's uv where the job's user can run it, as the emulator gives it (the venv's may
    # lie in a folder only root enters: a clone in a 0700 home).
    install_uv(bin_dir)
    # The VM's python3 is the venv's (as a Colab image has huggingface_hub), and a "system"
    # pytest beside it, as on Colab's image. Colab's presets set, as its kernel sets them.
    path = f"{bin_dir}:{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"
    env = {
        "PATH": path, "HOME": str(root / "home"), "LANG": "C.UTF-8",
        "UV_OFFLINE": "1", "UV_PYTHON_DOWNLOADS": "never",
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
        "UV_SYSTEM_PYTHON": "true", "PYTHONPATH": "/env/python",
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
    }  # fmt: skip
    return Vm(root, content, store, env)


@pytest.fixture
def project(tmp_path: Path) -> UvProject:
    return build_uv_project(tmp_path / "src" / "project")


def code_args(
    project: UvProject, *, mode: str = "git", commit: str | None = None, uv: bool = True,
    snapshot: str = "", subdir: str = "", repairs: Sequence[str] = (),
) -> list[str]:  # fmt: skip
    args = ["--code-mode", mode, "--code-commit", commit or project.commit]
    if mode == "git":
        args += ["--code-remote", project.remote_url]
    else:
        args += ["--code-snapshot", snapshot]
    if subdir:
        args += ["--code-subdir", subdir]
    if uv:
        args.append("--code-uv")
    for name in repairs:
        args += ["--code-repair", name]
    return args
