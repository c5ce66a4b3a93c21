"""Integration fixtures: a real Celery worker process on the real Redis, driving the emulator."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from worker.deps import build_ledger
from worker.records.ledger import Ledger
from worker.settings import load_settings
from worker.states import TERMINAL, JobState

ROOT = Path(__file__).resolve().parents[2]
EMULATOR = ROOT / "ops" / "colab"
EMU_ADMIN = ROOT / "ops" / "colab-emu"


@dataclass
class Fleet:
    """One worker process and everything it shares with the test: env, ledger, folders."""

    env: dict[str, str]
    ledger: Ledger
    root: Path
    proc: subprocess.Popen[bytes]

    def emu(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(EMU_ADMIN), *args], env=self.env, capture_output=True, text=True, timeout=30
        )

    def colab(self, *args: str) -> subprocess.CompletedProcess[str]:
        probe = self.root / "probe-sessions.json"
        return subprocess.run(
            [str(EMULATOR), "--config", str(probe), *args],
            env=self.env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
        )  # fmt: skip

    def wait_terminal(self, job_id: str, timeout_s: float = 90) -> JobState:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            state = self.ledger.get(job_id).state
            if state in TERMINAL:
                return state
            time.sleep(0.2)
        raise AssertionError(
            f"job {job_id} still {self.ledger.get(job_id).state} after {timeout_s}s"
        )

    def kill_worker(self) -> None:
        """SIGKILL the worker's main process and its pool at once (a crash, not a shutdown)."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def wait_state(self, job_id: str, state: JobState, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.ledger.get(job_id).state is state:
                return
            time.sleep(0.1)
        raise AssertionError(f"job {job_id} never reached {state}")


def start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    queue = f"{env['COLABQ_QUEUE_PREFIX']}gpu.t4"
    argv = [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker", "-Q", queue,
            "-c", "1", "-n", f"test-{secrets.token_hex(3)}@%h", "-l", "INFO", "-E"]  # fmt: skip
    # Its own process group, so a test can SIGKILL the whole worker (main + pool) at once; the
    # exec client and the watchdog run in sessions of their own and must survive that.
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if b"ready." in log.read_bytes():
            return proc
        if proc.poll() is not None:
            raise AssertionError(f"worker died: {log.read_text()[-2000:]}")
        time.sleep(0.2)
    raise AssertionError("worker not ready in 30 s")


def stop_worker(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def fleet_env_extra() -> dict[str, str]:
    """Extra worker environment; a test module overrides this fixture to change it."""
    return {}


@pytest.fixture
def fleet(redis_url: str, tmp_path: Path, fleet_env_extra: dict[str, str]) -> Iterator[Fleet]:
    prefix = f"colabq-it-{secrets.token_hex(4)}"
    (tmp_path / "home").mkdir()
    env = {
        **os.environ,
        "COLABQ_REDIS_URL": redis_url,
        "COLABQ_KEY_PREFIX": prefix,
        # Its own queue: no other worker on this Redis (another suite, a demo) takes its jobs.
        "COLABQ_QUEUE_PREFIX": f"{prefix}.",
        "COLABQ_STATE_DIR": str(tmp_path / "state"),
        "COLABQ_COLAB_BIN": str(EMULATOR),
        "COLABQ_POLL_INTERVAL_S": "0.2",
        "COLABQ_WATCHDOG_POLL_S": "0.5",
        "COLABQ_LEASE_TTL_S": "3",
        "COLABQ_HEARTBEAT_INTERVAL_S": "1",
        # The VM's python3 is the venv's, as a Colab image has huggingface_hub.
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "COLAB_EMU_HOME": str(tmp_path / "emulator"),
        "HOME": str(tmp_path / "home"),
        **fleet_env_extra,
    }
    proc = start_worker(env, tmp_path / "worker.log")
    ledger = build_ledger(load_settings(redis_url=redis_url, key_prefix=prefix))
    fleet = Fleet(env, ledger, tmp_path, proc)
    try:
        yield fleet
    finally:
        stop_worker(proc)
        fleet.emu("kill-all")
        kill_processes_mentioning(str(tmp_path))
        client = redis.Redis.from_url(redis_url)
        for pattern in (f"{prefix}*", f"_kombu.binding.{prefix}*"):
            for key in client.scan_iter(pattern):
                client.delete(key)


def kill_processes_mentioning(text: str) -> None:
    """End what a test left behind (watchdogs, exec clients): any process whose command line
    names the test's folder."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            with contextlib.suppress(OSError):
                os.kill(int(entry.name), signal.SIGKILL)
