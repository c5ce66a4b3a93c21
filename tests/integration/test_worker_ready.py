"""A worker that would fail every job it takes refuses to start, in one line that says what to
do: no `colab` CLI, an unwritable state dir, a token file others can read, an emulator whose
VMs the job's user cannot reach."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reachable import reachable_folder

pytestmark = pytest.mark.integration
EMULATOR = Path(__file__).resolve().parents[2] / "ops" / "colab"


def start(tmp_path: Path, redis_url: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        **os.environ, "COLABQ_REDIS_URL": redis_url, "COLABQ_KEY_PREFIX": "colabq-ready-test",
        "COLABQ_QUEUE_PREFIX": "colabq-ready-test.", "COLABQ_COLAB_BIN": str(EMULATOR),
        "COLAB_EMU_HOME": str(tmp_path / "emu"), "COLABQ_STATE_DIR": str(tmp_path / "state"),
        "HOME": str(tmp_path),
    }  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker", "-c", "1",
         "-Q", "colabq-ready-test.gpu.t4", "-l", "WARNING"],
        env={**base, **env}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def refusal(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 2, res.stdout + res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("colabq worker:")]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return lines[0]


def test_no_colab_cli(tmp_path: Path, redis_url: str) -> None:
    line = refusal(start(tmp_path, redis_url, COLABQ_COLAB_BIN=str(tmp_path / "no-colab")))
    assert "COLABQ_COLAB_BIN" in line and "google-colab-cli==0.7.4" in line


def test_state_dir_not_writable(tmp_path: Path, redis_url: str) -> None:
    line = refusal(start(tmp_path, redis_url, COLABQ_STATE_DIR="/proc/colabq-state"))
    assert "/proc/colabq-state" in line and "COLABQ_STATE_DIR" in line


def test_token_file_readable_by_others(tmp_path: Path, redis_url: str) -> None:
    token = tmp_path / "hf_token"
    token.write_text("hf_canary_not_a_real_token")
    token.chmod(0o644)
    res = start(tmp_path, redis_url, COLABQ_HF_TOKEN_FILE=str(token))
    line = refusal(res)
    assert "chmod 600" in line and "hf_canary" not in res.stdout + res.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the job as another user")
def test_emulator_vms_the_jobs_user_cannot_reach(tmp_path: Path, redis_url: str) -> None:
    """Its home and TMPDIR in a 0700 folder, the emulator has nowhere the job's user reaches
    (every job would exit 126): the worker names the folder and the fix instead of starting."""
    with reachable_folder("colabq-private-") as base:
        private = base / "home"
        (private / "tmp").mkdir(parents=True)
        private.chmod(0o700)
        emu_home, tmp = private / "emu", private / "tmp"
        line = refusal(start(tmp_path, redis_url, COLAB_EMU_HOME=str(emu_home), TMPDIR=str(tmp)))
        assert line.startswith(
            f"colabq worker: not starting: the emulator's VMs would lie in {emu_home}/vms, which "
            f"the job's user cannot reach ({private} is mode 0700)"
        ), line
        assert line.endswith("or TMPDIR=/tmp"), line
