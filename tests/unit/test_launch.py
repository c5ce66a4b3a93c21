"""The launch exec: its sentinel read while the client lingers, and a client that fails without
it judged on the VM (launched -> on, session gone -> VM_LOST, neither -> once more, never a
third time). The client is a real process (a shell standing in for `colab exec`); the VM's
answers come from a fake driver."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fakeredis
import pytest

from tests.factories import make_spec
from worker.clock import FakeClock
from worker.colab.driver import SessionStatus
from worker.errors import ColabError, ColabqError, RemotePathNotFound
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.session.job import Finish, JobRun, RunnerDeps
from worker.session.jobfiles import JobFiles
from worker.session.launch import Verdict, VmFacts, decide, launch_job, stream_launch
from worker.settings import Settings
from worker.states import JobState as S

NONCE = "abcd"
LAUNCHED = f"echo __COLABQ_{NONCE}_LAUNCHED__=4242"


@pytest.mark.parametrize(
    ("facts", "verdict"),
    [
        (VmFacts(alive=False, marker=None), Verdict.VM_LOST),
        (VmFacts(alive=False, marker=True), Verdict.VM_LOST),
        (VmFacts(alive=True, marker=True), Verdict.LAUNCHED),
        (VmFacts(alive=None, marker=True), Verdict.LAUNCHED),
        (VmFacts(alive=True, marker=False), Verdict.AGAIN),
        (VmFacts(alive=True, marker=None), Verdict.AGAIN),
        (VmFacts(alive=None, marker=None), Verdict.AGAIN),
    ],
)
def test_decide(facts: VmFacts, verdict: Verdict) -> None:
    assert decide(facts) is verdict


@dataclass
class FakeDriver:
    """`exec_argv` hands out one shell script per launch; status and the marker are settable."""

    config_path: Path
    scripts: list[str]
    alive: bool | None = True
    marker: bool | None = False
    calls: list[str] = field(default_factory=list)

    def exec_argv(self, name: str, file: Path, timeout_s: float) -> list[str]:
        self.calls.append("exec")
        return ["sh", "-c", self.scripts.pop(0), "colab-exec", str(file)]

    def exec_env(self) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}

    def status(self, name: str) -> SessionStatus | None:
        self.calls.append("status")
        if self.alive is None:
            raise ColabError("status failed")
        if not self.alive:
            return None
        return SessionStatus(name, "gpu-x", "T4", "Standard", "GPU", False, None, None)

    def download(
        self, name: str, remote: str, local: Path, *, timeout_s: float | None = None
    ) -> None:
        self.calls.append("download")
        assert remote.endswith("/run/launched")
        if self.marker is None:
            raise ColabError("download failed")
        if not self.marker:
            raise RemotePathNotFound(remote)
        local.write_text("4242")


class Verified:
    exit_code: int | None = None

    def summary(self) -> str:
        return "nothing synced"


class Store:
    def verify(self, spec: Any) -> Verified:
        return Verified()


def run_for(tmp_path: Path, driver: FakeDriver, **spec: Any) -> JobRun:
    ledger = Ledger(fakeredis.FakeRedis(), FakeClock(), Keys("t"), log_maxlen=1000)
    deps = RunnerDeps(
        clock=FakeClock(), ledger=ledger, driver=driver,  # type: ignore[arg-type]
        store=Store(),  # type: ignore[arg-type]
        settings=Settings(state_dir=tmp_path / "s"), files=JobFiles(tmp_path / "job").ensure(),
        start_watchdog=lambda files, env: None, check_input=lambda uri: 1,
    )  # fmt: skip
    run = JobRun(make_spec(**spec), "me", deps)
    run.name, run.nonce = "colabq-x", NONCE
    return run


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_the_sentinel_is_read_while_the_client_lingers(tmp_path: Path) -> None:
    pidfile = tmp_path / "client.pid"
    driver = FakeDriver(tmp_path, [f"echo $$ > {pidfile}; {LAUNCHED}; sleep 60"])
    started = time.monotonic()
    end = stream_launch(driver, "colabq-x", tmp_path / "cell.py", NONCE, 120.0, tmp_path / "e")
    assert end.launched == "4242"
    assert time.monotonic() - started < 30
    pid = int(pidfile.read_text())
    assert alive(pid)  # left to linger in its own process group, reaped when it ends
    os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


def test_a_killed_client_says_how(tmp_path: Path) -> None:
    driver = FakeDriver(tmp_path, ["echo partial; echo oops >&2; kill -9 $$"])
    end = stream_launch(driver, "colabq-x", tmp_path / "cell.py", NONCE, 120.0, tmp_path / "e")
    assert (end.launched, end.returncode) == (None, -9)
    assert "killed by a signal (-9)" in end.failure and "oops" in end.failure


def test_killed_client_but_marker_on_the_vm_is_launched(tmp_path: Path) -> None:
    driver = FakeDriver(tmp_path, ["kill -9 $$"], alive=True, marker=True)
    assert launch_job(run_for(tmp_path, driver), tmp_path / "cell.py") == (
        "the VM's run/launched marker"
    )
    assert driver.calls == ["exec", "status", "download"]


def test_killed_client_and_session_gone_is_vm_lost(tmp_path: Path) -> None:
    driver = FakeDriver(tmp_path, ["kill -9 $$"], alive=False)
    with pytest.raises(Finish) as got:
        launch_job(run_for(tmp_path, driver), tmp_path / "cell.py")
    assert got.value.state is S.VM_LOST
    assert "the VM was lost (colab status: the session is gone)" in got.value.reason
    assert driver.calls == ["exec", "status"]


def test_session_gone_with_restarts_left_restarts(tmp_path: Path) -> None:
    driver = FakeDriver(tmp_path, ["kill -9 $$"], alive=False)
    with pytest.raises(Finish) as got:
        launch_job(run_for(tmp_path, driver, max_restarts=1), tmp_path / "cell.py")
    assert got.value.state is S.RESTARTING


def test_not_launched_and_alive_launches_once_more(tmp_path: Path) -> None:
    driver = FakeDriver(tmp_path, ["exit 1", LAUNCHED], alive=True, marker=False)
    assert launch_job(run_for(tmp_path, driver), tmp_path / "cell.py") == "wrapper pid 4242"
    assert driver.calls == ["exec", "status", "download", "exec"]


def test_never_a_third_launch(tmp_path: Path) -> None:
    driver = FakeDriver(tmp_path, ["exit 1", "kill -9 $$"], alive=None, marker=None)
    with pytest.raises(ColabqError, match="did not start the job") as got:
        launch_job(run_for(tmp_path, driver), tmp_path / "cell.py")
    assert "exited 1" in str(got.value) and "killed by a signal (-9)" in str(got.value)
    assert driver.calls.count("exec") == 2


def test_a_cell_that_ran_and_failed_is_not_retried(tmp_path: Path) -> None:
    driver = FakeDriver(tmp_path, ["echo 'Traceback: tar broken' >&2; exit 0"])
    with pytest.raises(ColabqError, match="tar broken"):
        launch_job(run_for(tmp_path, driver), tmp_path / "cell.py")
    assert driver.calls == ["exec"]
