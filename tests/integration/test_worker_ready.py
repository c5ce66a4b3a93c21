"""A worker that would fail every job it takes refuses to start, in one line that says what to
do: no `colab` CLI, a `colab` release colabq does not drive, an unwritable state dir, a token file
others can read, an emulator whose VMs the job's user cannot reach. One that starts says which
release it drives, and warns in one line each about an unlisted release an operator accepted or
a login `colab whoami` cannot name."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.colab_standin import WHOAMI_NO_EMAIL, colab_with
from tests.reachable import reachable_folder

pytestmark = pytest.mark.integration
EMULATOR = Path(__file__).resolve().parents[2] / "ops" / "colab"


def worker_env(tmp_path: Path, redis_url: str, **env: str) -> dict[str, str]:
    base = {
        **os.environ, "COLABQ_REDIS_URL": redis_url, "COLABQ_KEY_PREFIX": "colabq-ready-test",
        "COLABQ_QUEUE_PREFIX": "colabq-ready-test.", "COLABQ_COLAB_BIN": str(EMULATOR),
        "COLAB_EMU_HOME": str(tmp_path / "emu"), "COLABQ_STATE_DIR": str(tmp_path / "state"),
        "HOME": str(tmp_path),
    }  # fmt: skip
    return {**base, **env}


ARGV = [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker", "-c", "1",
        "-Q", "colabq-ready-test.gpu.t4", "-l", "WARNING"]  # fmt: skip


def start(tmp_path: Path, redis_url: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ARGV, env=worker_env(tmp_path, redis_url, **env), capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip


def started(tmp_path: Path, redis_url: str, **env: str) -> list[str]:
    """The `colabq worker:` lines of a worker that starts (it is stopped once ready)."""
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*ARGV[:-1], "INFO"], env=worker_env(tmp_path, redis_url, **env), stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while b"ready." not in log.read_bytes():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "worker not ready in 90 s"
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return [ln for ln in log.read_text().splitlines() if ln.startswith("colabq worker:")]


def refusal(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 2, res.stdout + res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("colabq worker:")]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return lines[0]


def test_no_colab_cli(tmp_path: Path, redis_url: str) -> None:
    line = refusal(start(tmp_path, redis_url, COLABQ_COLAB_BIN=str(tmp_path / "no-colab")))
    assert "COLABQ_COLAB_BIN" in line and "uv tool install google-colab-cli==0.7.5" in line


@pytest.mark.parametrize("version", ["0.7.3", "0.8.0"])
def test_a_colab_release_colabq_does_not_drive(
    tmp_path: Path, redis_url: str, version: str
) -> None:
    line = refusal(start(tmp_path, redis_url, COLAB_EMU_VERSION=version))
    assert line == (
        f"colabq worker: not starting: colab CLI {version} is not supported: colabq drives "
        "0.7.4 and 0.7.5; install the newest with `uv tool install google-colab-cli==0.7.5` (or "
        f"set COLABQ_COLAB_UNLISTED_VERSION={version} to try this one at your own risk) "
        f"(COLABQ_COLAB_BIN={EMULATOR})"
    )


def test_a_supported_release_is_named_as_the_worker_starts(tmp_path: Path, redis_url: str) -> None:
    assert started(tmp_path, redis_url, COLAB_EMU_VERSION="0.7.4") == [
        "colabq worker: drives colab CLI 0.7.4 (supported: 0.7.4 and 0.7.5)"
    ]


def test_an_unlisted_release_runs_at_the_operators_risk_with_a_warning(
    tmp_path: Path, redis_url: str
) -> None:
    lines = started(
        tmp_path, redis_url, COLAB_EMU_VERSION="0.8.0", COLABQ_COLAB_UNLISTED_VERSION="0.8.0"
    )
    assert lines[0] == "colabq worker: drives colab CLI 0.8.0 (UNLISTED)"
    assert lines[1].startswith(
        "colabq worker: WARNING: colab CLI 0.8.0 is not a release colabq supports (0.7.4 and "
        "0.7.5): it runs at the operator's risk (COLABQ_COLAB_UNLISTED_VERSION=0.8.0)"
    )
    assert len(lines) == 2


def test_a_login_whoami_cannot_name_runs_as_the_account_setting_with_a_warning(
    tmp_path: Path, redis_url: str
) -> None:
    colab = str(colab_with(tmp_path, "whoami", WHOAMI_NO_EMAIL))
    lines = started(tmp_path, redis_url, COLABQ_COLAB_BIN=colab, COLABQ_ACCOUNT="ops@example.com")
    assert lines[1] == (
        "colabq worker: WARNING: `colab whoami` cannot name this host's Colab login (it prints "
        "no email (a login without the userinfo.email scope, as ADC can be)); running as "
        "COLABQ_ACCOUNT=ops@example.com, which colabq cannot check"
    )
    assert len(lines) == 2


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
