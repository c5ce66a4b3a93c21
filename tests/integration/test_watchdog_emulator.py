"""The watchdog's rules against the Colab emulator, with a fake clock where time matters.

The session, the exec client, `colab status` and `colab stop` are real (the emulator); only the
watchdog's sense of time is faked, so "idle for 180 s" takes no 180 s.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from worker.clock import FakeClock
from worker.colab.driver import ColabCli
from worker.session.jobfiles import JobFiles, ProcRef, WatchSpec
from worker.session.watchdog import Watchdog
from worker.session.watchpolicy import Act, Phase

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
COLAB = ROOT / "ops" / "colab"
EMU = ROOT / "ops" / "colab-emu"
IDLE_S = 180.0
POLL_S = 15.0


@dataclass
class ListSink:
    events: list[str] = field(default_factory=list)
    endpoints: list[str] = field(default_factory=list)
    stops: list[tuple[str, bool]] = field(default_factory=list)
    cancel: bool = False

    def event(self, text: str) -> None:
        self.events.append(text)

    def endpoint_seen(self, endpoint: str) -> None:
        self.endpoints.append(endpoint)

    def stopped(self, reason: str, verified: bool) -> None:
        self.stops.append((reason, verified))

    def gone(self, at: float) -> None:
        self.events.append(f"gone at {at}")

    def recovered(self, where: str) -> None:
        self.events.append(f"recovered to {where}")

    def heartbeat(self, at: float) -> None:
        pass

    def cancel_requested(self) -> bool:
        return self.cancel

    def forwarded(self) -> int | None:
        return 1 << 40  # everything: these tests are about the session, not the console


@dataclass
class Rig:
    env: dict[str, str]
    driver: ColabCli
    files: JobFiles
    clock: FakeClock
    sink: ListSink
    name: str = "colabq-" + "ab" * 16
    clients: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def emu(self, *args: str) -> str:
        res = subprocess.run(
            [str(EMU), *args], env=self.env, capture_output=True, text=True, timeout=30
        )
        assert res.returncode == 0, res.stderr
        return res.stdout

    def watchdog(self, wall_in_s: float = 12 * 3600) -> Watchdog:
        spec = WatchSpec(
            job_id="job1", session=self.name, colab_bin=str(COLAB),
            config_path=str(self.driver.config_path),
            wall_deadline_at=self.clock.time() + wall_in_s,
            idle_timeout_s=IDLE_S, poll_s=POLL_S, remote_job_dir="/content/colab-jobs/job1",
            heartbeat_path="/content/colab-jobs/job1/run/heartbeat", heartbeat_stale_s=60,
            owner_stale_s=30,
        )  # fmt: skip
        self.files.write_watch(spec)
        return Watchdog(self.files, spec, self.driver, self.clock, self.sink)

    def allocate(self, name: str | None = None) -> str:
        self.driver.new(name or self.name, "T4", False)
        rec = self.driver.local_record(name or self.name)
        assert rec is not None
        return rec.endpoint

    def start_client(self, seconds: float) -> subprocess.Popen[bytes]:
        code = self.files.root / "sleep.py"
        code.write_text(f"import time\nprint('started', flush=True)\ntime.sleep({seconds})\n")
        proc = subprocess.Popen(
            self.driver.exec_argv(self.name, code, 600), env=self.driver.exec_env(),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"started"
        self.clients.append(proc)
        return proc

    def server_sessions(self) -> list[str]:
        return [s.endpoint for s in self.driver.sessions()]

    def vm_beat(self, endpoint: str, phase: str, at: float | None = None) -> None:
        """What the wrapper on the VM writes: its heartbeat file (written straight into the
        emulated VM's disk, as the wrapper would)."""
        run = (
            Path(self.env["COLAB_EMU_HOME"]) / "vms" / endpoint / "root/content/colab-jobs/job1/run"
        )
        run.mkdir(parents=True, exist_ok=True)
        at = self.clock.time() if at is None else at
        (run / "heartbeat").write_text(json.dumps({"at": at, "phase": phase, "pid": 1}))

    def owner_beats(self) -> None:
        """The owner's lease thread: its beat, on the watchdog's (fake) clock."""
        self.files.beat_runner(self.clock.time())


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "COLAB_EMU_HOME": str(tmp_path / "emu")}
    files = JobFiles(tmp_path / "job").ensure()
    driver = ColabCli(COLAB, files.cli_config, env=env)
    r = Rig(env, driver, files, FakeClock(start=time.time()), ListSink())
    try:
        yield r
    finally:
        for c in r.clients:
            if c.poll() is None:
                c.kill()
            c.wait()
        subprocess.run([str(EMU), "kill-all"], env=env, capture_output=True, timeout=30)


def step_until(wd: Watchdog, clock: FakeClock, *, until_s: float) -> list[tuple[float, Act]]:
    """Poll like the real loop (every POLL_S of fake time) until `until_s` passed or it stops."""
    acts = []
    start = clock.time()
    while clock.time() - start <= until_s:
        d = wd.step()
        acts.append((clock.time() - start, d.act))
        if d.act in (Act.STOP, Act.EXIT):
            break
        clock.advance(POLL_S)
    return acts


def test_stale_busy_after_client_killed_is_stopped_after_idle_timeout_not_before(rig: Rig) -> None:
    endpoint = rig.allocate()
    rig.files.record_endpoint(rig.name, endpoint)
    client = rig.start_client(300)
    rig.files.write_runner(Phase.RUNNING, client=ProcRef.of(client.pid))
    wd = rig.watchdog()
    assert wd.step().act is Act.WAIT  # busy: the client lives
    client.send_signal(signal.SIGKILL)
    client.wait()
    status = rig.driver.status(rig.name)
    assert status is not None and status.busy  # 0.7.4 leaves BUSY stale
    acts = step_until(wd, rig.clock, until_s=IDLE_S + POLL_S)
    stop_at = [t for t, a in acts if a is Act.STOP]
    assert stop_at, acts
    assert IDLE_S <= stop_at[0] <= IDLE_S + POLL_S
    assert all(a is Act.WAIT for t, a in acts if t < IDLE_S)
    assert rig.server_sessions() == []
    assert rig.sink.stops and rig.sink.stops[0][1] is True  # verified


def test_uploads_slower_than_idle_timeout_are_not_stopped(rig: Rig) -> None:
    endpoint = rig.allocate()
    rig.files.record_endpoint(rig.name, endpoint)
    rig.files.write_runner(Phase.UPLOADING)
    subprocess.run(
        [str(EMU), "faults", "set", "upload", json.dumps({"delay_s": 3})], env=rig.env, check=True
    )
    big = rig.files.root / "payload.bin"
    big.write_bytes(os.urandom(1024))
    wd = rig.watchdog()
    upload = threading.Thread(
        target=rig.driver.upload, args=(rig.name, big, "/content/payload.bin")
    )
    upload.start()
    acts = []
    while upload.is_alive():
        rig.owner_beats()
        acts.append(wd.step().act)
        rig.clock.advance(IDLE_S)  # each poll, far more than the idle timeout passes
        time.sleep(0.2)
    upload.join()
    assert acts and all(a is Act.WAIT for a in acts)
    assert rig.server_sessions() == [endpoint]
    assert "payload.bin" in rig.driver.ls(rig.name, "/content")


def test_wall_cap_stops_a_busy_session(rig: Rig) -> None:
    endpoint = rig.allocate()
    rig.files.record_endpoint(rig.name, endpoint)
    client = rig.start_client(300)
    rig.files.write_runner(Phase.RUNNING, client=ProcRef.of(client.pid))
    wd = rig.watchdog(wall_in_s=3600)
    assert wd.step().act is Act.WAIT
    rig.clock.advance(3600)
    assert wd.step().act is Act.STOP
    assert rig.server_sessions() == []
    client.wait(timeout=30)  # the watchdog also ends the exec client


def test_status_error_at_wall_cap_with_unchanged_endpoint_is_stopped(rig: Rig) -> None:
    endpoint = rig.allocate()
    rig.files.record_endpoint(rig.name, endpoint)
    client = rig.start_client(300)
    rig.files.write_runner(Phase.RUNNING, client=ProcRef.of(client.pid))
    wd = rig.watchdog(wall_in_s=60)
    rig.emu("faults", "set", "status", json.dumps({"http": 500}))
    rig.clock.advance(60)
    d = wd.step()
    assert d.act is Act.STOP, d.reason
    rig.emu("faults", "clear")
    assert rig.server_sessions() == []


def test_status_error_at_wall_cap_with_changed_endpoint_is_not_stopped(rig: Rig) -> None:
    endpoint = rig.allocate()
    rig.files.record_endpoint(rig.name, endpoint)
    rig.files.write_runner(Phase.RUNNING)
    wd = rig.watchdog(wall_in_s=60)
    rig.emu("reassign", "--config", str(rig.driver.config_path), rig.name)
    rig.emu("faults", "set", "status", json.dumps({"http": 500}))
    rig.clock.advance(120)
    for _ in range(3):
        assert wd.step().act is Act.WAIT
        rig.clock.advance(POLL_S)
    rig.emu("faults", "clear")
    assert endpoint in rig.server_sessions() and len(rig.server_sessions()) == 2


def test_endpoint_mismatch_is_never_stopped_reported_once_and_handed_over(rig: Rig) -> None:
    endpoint = rig.allocate()
    rig.files.record_endpoint(rig.name, endpoint)
    rig.files.write_runner(Phase.RUNNING)
    rig.emu("reassign", "--config", str(rig.driver.config_path), rig.name)
    wd = rig.watchdog(wall_in_s=3600)
    acts = []
    for _ in range(8):  # the owner lives: report, keep watching
        rig.owner_beats()
        acts.append(wd.step().act)
        rig.clock.advance(POLL_S)
    assert set(acts) == {Act.REPORT}
    assert sum("NOT stopping" in e for e in rig.sink.events) == 1  # once, not every poll
    rig.files.write_runner(Phase.DONE)
    assert wd.step().act is Act.EXIT  # the owner is done: the janitor takes it from here
    assert len(rig.server_sessions()) == 2


def test_a_session_of_another_name_is_never_stopped(rig: Rig) -> None:
    endpoint = rig.allocate()
    other = rig.allocate("colabq-someone-else")
    rig.files.record_endpoint(rig.name, endpoint)
    rig.files.write_runner(Phase.RUNNING)
    wd = rig.watchdog()
    acts = step_until(wd, rig.clock, until_s=IDLE_S + POLL_S)
    assert acts[-1][1] is Act.STOP
    assert rig.server_sessions() == [other]


def test_endpoint_is_recorded_from_the_cli_state_as_soon_as_it_appears(rig: Rig) -> None:
    rig.files.write_runner(Phase.ALLOCATING)
    wd = rig.watchdog()
    assert wd.step().act is Act.WAIT and rig.files.endpoint(rig.name) is None
    endpoint = rig.allocate()
    wd.step()
    assert rig.files.endpoint(rig.name) == endpoint and rig.sink.endpoints == [endpoint]


def test_never_seen_assignment_is_never_touched(rig: Rig) -> None:
    rig.emu("orphan", "--gpu", "T4")
    rig.files.write_runner(Phase.DONE)
    wd = rig.watchdog(wall_in_s=0)
    assert wd.step().act is Act.EXIT
    assert len(rig.server_sessions()) == 1


def test_dead_client_never_starts_the_idle_timer_while_the_job_runs_on_the_vm(rig: Rig) -> None:
    endpoint = rig.allocate()
    rig.files.record_endpoint(rig.name, endpoint)
    rig.files.write_runner(Phase.RUNNING)  # no client: it died
    wd = rig.watchdog()
    for _ in range(int(2 * IDLE_S / POLL_S)):
        rig.vm_beat(endpoint, "running")  # the wrapper keeps beating
        assert wd.step().act is Act.WAIT
        rig.clock.advance(POLL_S)
    assert rig.server_sessions() == [endpoint]
    rig.vm_beat(endpoint, "running", at=rig.clock.time() - 600)  # the VM went silent
    acts = step_until(wd, rig.clock, until_s=IDLE_S + POLL_S)
    assert acts[-1][1] is Act.STOP and acts[-1][0] >= IDLE_S
    assert rig.server_sessions() == []


def test_a_finished_job_with_no_owner_is_stopped_at_once(rig: Rig) -> None:
    endpoint = rig.allocate()
    rig.files.record_endpoint(rig.name, endpoint)
    rig.files.write_runner(Phase.RUNNING)
    wd = rig.watchdog()
    rig.clock.advance(120)  # the owner's beat is stale: it died
    rig.vm_beat(endpoint, "done")
    assert wd.step().act is Act.STOP
    assert rig.server_sessions() == []


def test_owner_killed_before_any_endpoint_lets_the_watchdog_exit(rig: Rig) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    rig.files.write_runner(Phase.ALLOCATING)
    state = rig.files.read_runner()
    assert state is not None
    # The owner process is gone (a pid that exited) and no `colab new` runs for this job.
    (rig.files.root / "runner.json").write_text(
        json.dumps({"phase": "allocating", "runner": {"pid": dead.pid, "start_ticks": 1},
                    "client": None, "beat_at": rig.clock.time()})
    )  # fmt: skip
    wd = rig.watchdog()
    assert wd.step().act is Act.EXIT


def test_failing_status_is_reported_once_and_the_watchdog_ends_after_the_job(rig: Rig) -> None:
    endpoint = rig.allocate()
    rig.files.record_endpoint(rig.name, endpoint)
    rig.files.write_runner(Phase.RUNNING)
    wd = rig.watchdog()
    rig.emu("faults", "set", "status", json.dumps({"http": 503}))
    for _ in range(6):
        rig.owner_beats()
        assert wd.step().act is Act.WAIT
        rig.clock.advance(POLL_S)
    assert sum("status failed" in e for e in rig.sink.events) == 1
    rig.files.write_runner(Phase.DONE)
    acts = [wd.step().act for _ in range(5)]
    assert Act.EXIT in acts
    rig.emu("faults", "clear")


def test_session_gone_kills_the_job_exec_clients_and_exits(rig: Rig) -> None:
    endpoint = rig.allocate()
    rig.files.record_endpoint(rig.name, endpoint)
    client = rig.start_client(300)
    rig.files.write_runner(Phase.RUNNING, client=ProcRef.of(client.pid))
    wd = rig.watchdog()
    assert wd.step().act is Act.WAIT
    rig.emu("unassign", endpoint)  # preempted
    assert wd.step().act is Act.EXIT
    assert client.wait(timeout=10) is not None  # no exec left hanging on a dead VM
    assert rig.files.gone(rig.name)
