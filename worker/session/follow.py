"""Following a running job: keep an attach client alive until the job's end is recorded, and
notice at once what ends the wait otherwise (a cancel, the wall cap, a lost VM).

The attach client is replaceable: when it dies (killed, its websocket dropped, its host rebooted)
the job goes on on the VM, and this loop clears the stale cell with `colab restart-kernel` and
attaches again from the recorded offset, backing off if attaching keeps failing. When the client
dies and the session is gone (the watchdog saw it, or a status call says so and the account's
assignments agree: the CLI prunes a live VM's record after a 401, `witness` writes it again),
the job's end is looked for where it survives: the sentinels already forwarded, then the store.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from worker.clock import Clock
from worker.colab.driver import ColabDriver
from worker.colab.witness import Witness, confirm_gone
from worker.errors import ColabError
from worker.records.ledger import Ledger
from worker.session import procs
from worker.session.attach import PROGRESS_FILE, AttachSpec, read_progress
from worker.session.jobfiles import JobFiles, ProcRef
from worker.session.vmbeat import read_beat
from worker.session.watchpolicy import Phase

Spawner = Callable[[list[str], Path, Mapping[str, str]], ProcRef]


class Ended(StrEnum):
    JOB_ENDED = "job_ended"  # the wrapper's end (DONE, or gone without one) was forwarded
    CANCELLED = "cancelled"
    WALL_CAP = "wall_cap"
    SESSION_GONE = "session_gone"  # the VM went away before the job's end was forwarded


@dataclass(frozen=True)
class FollowResult:
    ended: Ended
    reason: str


@dataclass
class Follower:
    """One owner's loop over one session of one job."""

    job_id: str
    session: str
    files: JobFiles
    ledger: Ledger
    driver: ColabDriver
    clock: Clock
    spawn: Spawner
    env: Mapping[str, str]
    attach: AttachSpec
    deadline_at: float
    poll_s: float
    backoff_max_s: float
    fence: Callable[[], None]
    log: Callable[[str], None]
    cancelled: Callable[[], str | None]
    # An adopter may find a dead client's cell still running in the kernel: clear it first.
    stale_cells: bool = False
    # A live client that received nothing for this long while the VM's console grew lost its
    # connection: it is replaced. `heartbeat_path` is the wrapper's heartbeat on the VM.
    stall_s: float = 30.0
    heartbeat_path: str = ""
    # Told of the job's watch hash each time the loop reads it (`worker.progress.guard`).
    on_watch: Callable[[Mapping[str, str]], None] = lambda watch: None
    _checked_at: float = 0.0

    def run(self) -> FollowResult:
        client = self._current_client()
        attaches = 0 if client is None and not self.stale_cells else 1
        backoff_s = 0.0
        next_attach_at = self.clock.monotonic()
        attached_at = self.clock.monotonic()
        while True:
            watch = self.ledger.read_watch(self.job_id)
            if _ended(watch):
                return FollowResult(Ended.JOB_ENDED, "the job's end was forwarded")
            self.on_watch(watch)
            if reason := self.cancelled():
                return FollowResult(Ended.CANCELLED, f"cancelled while running: {reason}")
            if self.clock.time() >= self.deadline_at:
                return FollowResult(Ended.WALL_CAP, "wall cap reached")
            if client is not None and client.alive():
                if self.clock.monotonic() - attached_at > 60:
                    backoff_s = 0.0  # it has been running fine: a new failure starts afresh
                if not self._stalled(client):
                    self._wait_while_alive(client)
                    continue
                procs.kill_job_processes(self.files.root)
            if client is not None:
                client = None
                gone = self._session_gone()
                if gone is not None:
                    return gone
            if self.clock.monotonic() < next_attach_at:
                self.clock.sleep(min(self.poll_s, next_attach_at - self.clock.monotonic()))
                continue
            self.fence()
            if attaches:
                # A killed client's cell still runs in the kernel; the next exec would queue
                # behind it. Restarting the kernel spares the job: it runs in its own session.
                procs.kill_job_processes(self.files.root)
                try:
                    self.driver.restart_kernel(self.session)
                except ColabError as exc:
                    self.log(f"restart-kernel failed: {exc}")
                    gone = self._session_gone()
                    if gone is not None:
                        return gone
            client = self._spawn()
            attaches += 1
            if attaches > 1:
                self.log(f"attach client {attaches - 1} ended; attached again (pid {client.pid})")
            attached_at = self.clock.monotonic()
            next_attach_at = attached_at + backoff_s
            backoff_s = min(max(1.0, backoff_s * 2), self.backoff_max_s)

    def _end_forwarded(self) -> bool:
        return _ended(self.ledger.read_watch(self.job_id))

    def _wait_while_alive(self, client: ProcRef) -> None:
        """Up to a poll, but back at once when the client ends (it ends on the job's end)."""
        until = self.clock.monotonic() + self.poll_s
        while self.clock.monotonic() < until and client.alive():
            self.clock.sleep(min(0.05, self.poll_s))

    def _stalled(self, client: ProcRef) -> bool:
        """The client lives but its connection died: nothing received for `stall_s` while the
        VM's console holds more than it received."""
        got = read_progress(self.files.root / PROGRESS_FILE)
        now = self.clock.time()
        if got is None or got[0] != client.pid or now - got[2] < self.stall_s:
            return False
        if not self.heartbeat_path or now - self._checked_at < self.stall_s:
            return False
        self._checked_at = now
        try:
            beat = read_beat(self.driver, self.session, self.heartbeat_path, 30.0)
        except ColabError:
            return False  # unknown: never a reason to kill a client
        if beat is None or beat.console_bytes <= got[1]:
            return False  # a quiet job, not a dead connection
        self.log(
            f"the attach client received nothing for {now - got[2]:.0f}s while the VM's console "
            f"grew to {beat.console_bytes} bytes (received {got[1]}): its connection is gone; "
            "attaching again"
        )
        return True

    def _current_client(self) -> ProcRef | None:
        """A client a previous owner on this host started may still be following: keep it."""
        state = self.files.read_runner()
        if state is not None and state.client is not None and state.client.alive():
            self.files.write_runner(Phase.RUNNING, client=state.client)
            return state.client
        return None

    def _spawn(self) -> ProcRef:
        self.attach.dump(self.files.attach_spec)
        argv = [sys.executable, "-m", "worker.session.attach", str(self.files.root)]
        ref = self.spawn(argv, self.files.root / "attach.log", self.env)
        self.files.write_runner(Phase.RUNNING, client=ref)
        return ref

    def _session_gone(self) -> FollowResult | None:
        """After the client died: is the session gone? (The watchdog may have seen it.)"""
        if self._end_forwarded():
            return FollowResult(Ended.JOB_ENDED, "the job's end was forwarded")
        if self.files.gone(self.session):
            return FollowResult(Ended.SESSION_GONE, "the watchdog found the session gone")
        try:
            st = self.driver.status(self.session)
        except ColabError as exc:
            self.log(f"status failed after the attach client ended: {exc}")
            return None
        endpoint = self.files.endpoint(self.session)
        if st is None and endpoint is not None:
            # "Not found" may be a record the CLI pruned after a 401 while the VM lives.
            seen = confirm_gone(self.driver, self.session, endpoint, self.log)
            if seen is not Witness.GONE:
                return None
        if st is None:
            return FollowResult(Ended.SESSION_GONE, "colab status and sessions: the VM is gone")
        return None


def _ended(watch: Mapping[str, str]) -> bool:
    """The attach's end, or the wrapper's DONE: every line before it was forwarded (in order),
    and nothing after it is the job's. A client cut between the two (its connection died with
    the output) leaves DONE alone; attaching again would wait for the wrapper."""
    return watch.get("exec_end") is not None or watch.get("exec_done") is not None
