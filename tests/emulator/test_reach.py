"""The job's user reaches a VM and runs its tools wherever the emulator lives (issue 25).

Run as root, colabq's wrapper runs the job as an unprivileged user. A clone in a folder only its
owner can enter (a 0700 home, `mktemp -d`) holds the emulator, its Python and the `.venv` whose
uv the VMs get: the VM's `/opt/bin/uv` must not be a link into it, nor `nvidia-smi` run the
clone's files. Where the emulator home and TMPDIR are both private, `colab-emu reach` says so
in one line, with the fix.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.emulator.conftest import COLAB, COLAB_EMU, Emu
from tests.reachable import reachable_folder

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="only root runs a job as another user (and needs setpriv to try it)",
)
FAKE_UV = "#!/bin/sh\necho 'uv 0.0.0-private'\n"


def as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", *argv],
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
        capture_output=True, text=True, timeout=30, cwd="/",
    )  # fmt: skip


def private_python(tmp_path: Path) -> tuple[Path, Path]:
    """A "venv" in a 0700 folder: its python3 (this interpreter, by a link) and a uv beside it,
    which the emulator run with that python3 gives its VMs."""
    clone = tmp_path / "home" / "colabq"
    bin_dir = clone / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (tmp_path / "home").chmod(0o700)
    python = bin_dir / "python3"
    python.symlink_to(os.path.realpath(sys.executable))
    uv = bin_dir / "uv"
    uv.write_text(FAKE_UV)
    uv.chmod(0o755)
    return python, uv


def test_a_vms_uv_and_nvidia_smi_run_as_the_jobs_user_from_a_private_clone(
    emu: Emu, tmp_path: Path
) -> None:
    python, uv = private_python(tmp_path)
    with reachable_folder("colab-emu-home-") as shared_home:
        env = {**emu.env, "COLAB_EMU_HOME": str(shared_home / "emu")}
        for emu_home in (emu.emu_home, shared_home / "emu"):  # below a private folder, and not
            done = subprocess.run(
                [str(python), str(COLAB), "new", "-s", "g", "--gpu", "T4"],
                env={**env, "COLAB_EMU_HOME": str(emu_home)}, cwd=emu.workdir,
                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert done.returncode == 0, done.stdout + done.stderr
            vm = next((emu_home / "vms").iterdir()).resolve()
            opt_bin = vm / "root" / "opt" / "bin"
            target = (opt_bin / "uv").resolve()
            assert not target.is_relative_to(tmp_path / "home"), target  # never into the clone
            ran = as_nobody(str(opt_bin / "uv"))
            assert ran.returncode == 0 and ran.stdout == "uv 0.0.0-private\n", ran.stderr
            smi = as_nobody(str(opt_bin / "nvidia-smi"), "-L")
            assert smi.returncode == 0 and smi.stdout.startswith("GPU 0: Tesla T4"), smi.stderr
            subprocess.run(
                [str(python), str(COLAB_EMU), "--home", str(emu_home), "kill-all"],
                env=env, capture_output=True, timeout=60, check=True,
            )  # fmt: skip
    assert as_nobody(str(uv)).returncode != 0  # the clone's own uv: the job's user cannot
    if target.parent.parent.name == "image":
        shutil.rmtree(target.parent)  # the copy of this test's uv, made for it alone


def test_reach_names_the_private_folder_and_the_fix(emu: Emu) -> None:
    with reachable_folder("colab-emu-") as base:
        private = base / "home"
        (private / "tmp").mkdir(parents=True)
        private.chmod(0o700)

        def reach(**extra: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [str(COLAB_EMU), "reach"],
                env={**emu.env, "COLAB_EMU_HOME": str(private / "emu"), **extra},
                capture_output=True, text=True, timeout=30,
            )  # fmt: skip

        nowhere = reach(TMPDIR=str(private / "tmp"))
        assert nowhere.returncode == 1 and nowhere.stdout == "", nowhere
        line = nowhere.stderr
        assert line.count("\n") == 1, line
        assert line.startswith(f"colab-emu: the emulator's VMs would lie in {private}/emu/vms")
        assert f"({private} is mode 0700)" in line and "TMPDIR=/tmp" in line, line
        fallback = reach(TMPDIR="/tmp")
        assert fallback.returncode == 0 and fallback.stdout == "/tmp/colab-emu-vms\n", fallback
        here = reach(COLAB_EMU_HOME=str(base / "emu"))
        assert here.returncode == 0 and here.stdout == f"{base / 'emu' / 'vms'}\n", here
