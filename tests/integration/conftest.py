"""Integration fixtures: a real Celery worker process on the real Redis, driving the emulator."""

from __future__ import annotations

import contextlib
import json
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

from ops.chaos.env import (
    EMU_ADMIN,
    EMULATOR,
    drop_job_share,
    fleet_env,
    job_share,
    kill_processes_mentioning,
)
from producer.ask import wait_for_gate
from worker.deps import build_ledger
from worker.records.ledger import Ledger
from worker.records.redisconn import client as redis_client
from worker.records.sentinelurl import SentinelLogin
from worker.settings import load_settings
from worker.states import TERMINAL, JobState


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

    def run_colab(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The emulated `colab` as another machine of the account would run it."""
        return subprocess.run(
            [str(EMULATOR), *args],
            env=self.env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

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

    def restart_worker(self) -> None:
        """A new worker process on the same host and state dir (what a supervisor does)."""
        self.proc = start_worker(self.env, self.root / "worker.log")

    def lose_host(self) -> None:
        """The whole worker host goes: the worker, and every watchdog and exec client it ran."""
        self.kill_worker()
        kill_processes_mentioning(self.env["COLABQ_STATE_DIR"])

    def other_host(self, name: str = "host2") -> dict[str, str]:
        """The environment of another machine of the deployment: same Redis and account, its
        own state dir and home."""
        home = self.root / name / "home"
        home.mkdir(parents=True, exist_ok=True)
        return {**self.env, "COLABQ_STATE_DIR": str(self.root / name / "state"), "HOME": str(home)}

    def share(self) -> Path:
        """A folder the job's (unprivileged) user on the VM can write and the test can read."""
        return job_share(self.root)

    def job_dir(self, job_id: str) -> Path:
        return Path(self.env["COLABQ_STATE_DIR"]) / "jobs" / job_id

    def exec_processes(self, job_id: str) -> list[int]:
        """Live attach clients and `colab exec` processes of the job (a real one left running
        would write its stopped session's record back)."""
        from worker.session.procs import find_job_processes, is_exec_client

        return [
            pid for pid, argv in find_job_processes(self.job_dir(job_id)) if is_exec_client(argv)
        ]

    def cli_records(self, job_id: str) -> dict[str, object]:
        path = self.job_dir(job_id) / "colab-sessions.json"
        try:
            text = path.read_text()
        except FileNotFoundError:
            return {}
        return json.loads(text) if text.strip() else {}

    def output(self, job_id: str) -> list[str]:
        """The job's own lines in its log stream (not colabq's or the watchdog's)."""
        return [ln.text for ln in self.ledger.read_log(job_id, count=100_000) if ln.stream == "out"]

    def billing(self) -> list[dict[str, object]]:
        """The emulated account's assignments, ended and open, with their billed seconds."""
        res = self.emu("billing", "--json")
        assert res.returncode == 0, res.stderr
        return list(json.loads(res.stdout))

    def wait_state(self, job_id: str, state: JobState, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.ledger.get(job_id).state is state:
                return
            time.sleep(0.1)
        raise AssertionError(f"job {job_id} never reached {state}")


def start_worker(env: dict[str, str], log: Path, gpu: str = "T4") -> subprocess.Popen[bytes]:
    """A worker on `gpu`'s queue (its settings' GPU types are `env`'s), once it is ready."""
    queue = f"{env['COLABQ_QUEUE_PREFIX']}gpu.{gpu.lower()}"
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
    """The end of a test: the worker's whole process group at once (no warm shutdown to wait
    for; whatever it leaves is cleaned up next)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.fixture
def fleet_env_extra() -> dict[str, str]:
    """Extra worker environment; a test module overrides this fixture to change it."""
    return {}


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    rep = yield
    setattr(item, f"rep_{rep.when}", rep)
    return rep


def dump_jobs(fleet: Fleet) -> None:
    """On a failed test: every job's history and log, to read why."""
    for rec in fleet.ledger.list_jobs(20):
        print(f"--- job {rec.job_id}: {rec.state.name}: {rec.reason}")
        for h in fleet.ledger.history(rec.job_id):
            print(f"    {h.state.name}: {h.reason}")
        for line in fleet.ledger.read_log(rec.job_id, count=400):
            print(f"    | {line.text}")
        print(f"    watch: {fleet.ledger.read_watch(rec.job_id)}")


@pytest.fixture
def fleet(
    redis_url: str, tmp_path: Path, fleet_env_extra: dict[str, str], request: pytest.FixtureRequest
) -> Iterator[Fleet]:
    prefix = f"colabq-it-{secrets.token_hex(4)}"
    env = fleet_env(redis_url, tmp_path, prefix, fleet_env_extra)
    proc = start_worker(env, tmp_path / "worker.log")
    ledger = build_ledger(load_settings(redis_url=redis_url, key_prefix=prefix))
    # The worker's gate duty serves the test's requests (submit, cancel...) once it holds the
    # gate's lease, taken as the worker comes up.
    assert wait_for_gate(ledger, 60), "the worker's gate never took its lease"
    fleet = Fleet(env, ledger, tmp_path, proc)
    try:
        yield fleet
    finally:
        rep = getattr(request.node, "rep_call", None)
        if rep is not None and rep.failed:
            dump_jobs(fleet)
        stop_worker(fleet.proc)
        fleet.emu("kill-all")
        kill_processes_mentioning(str(tmp_path))
        drop_job_share(tmp_path)
        login = SentinelLogin(
            fleet.env.get("COLABQ_REDIS_SENTINEL_USERNAME") or None,
            fleet.env.get("COLABQ_REDIS_SENTINEL_PASSWORD") or None,
        )
        client = redis_client(redis_url, fleet.env.get("COLABQ_REDIS_MASTER_NAME"), login)
        for pattern in (f"{prefix}*", f"_kombu.binding.{prefix}*"):
            for key in client.scan_iter(pattern):
                client.delete(key)
