"""The watchdog: one detached process per job and host that makes sure its session ends
(invariant 2), whoever else dies.

Started and confirmed alive before `colab new`, in its own process session so that a worker crash
or restart does not take it down (a restarted worker, or an adopter on this host, finds it by its
pid file). Each poll it observes (the owner's phase and beat, the attach client's life, the
endpoint, `colab status` every poll so a lost VM is noticed at once (a "not found" confirmed by
the account's assignments: the CLI prunes a live VM's record after a 401, see `witness`), the
VM's heartbeat when the host alone cannot tell whether the job runs), asks `watchpolicy.decide`,
and acts: a verified stop, after recovering the results of a VM that holds their only copy; a
report, once per change; or, once the session is gone, it kills the job's exec clients (a real
`colab exec` on a lost VM would wait for its `--timeout`, then write the stopped session's record
back) and exits. Redis is never waited on (`RedisSink`): an outage changes none of this.

    python -m worker.session.watchdog JOB_DIR
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from worker.clock import Clock, SystemClock
from worker.colab.driver import ColabDriver
from worker.colab.witness import Witness, confirm_gone
from worker.errors import ColabError, ColabqError
from worker.session import procs
from worker.session.jobfiles import JobFiles, ProcRef, WatchSpec
from worker.session.recovery import recover_results
from worker.session.vmbeat import read_beat
from worker.session.watchpolicy import (
    OVER_PHASES,
    Act,
    Decision,
    Observation,
    Phase,
    Seen,
    Vm,
    decide,
    needs_vm_heartbeat,
)

if TYPE_CHECKING:
    from worker.records.forward import Feed

ALLOCATION_POLL_S = 0.2  # while `colab new` runs, catch the endpoint the moment it is written
CONFIRM_TIMEOUT_S = 15.0
MAX_KEPT_EVENTS = 200  # reports kept through an outage; older ones are counted, not kept


class WatchdogNotAlive(ColabqError):
    hint = "Nothing was allocated. Check the worker host's process limits and retry."


class WatchSink(Protocol):
    """Where the watchdog reports (the job's log stream and watch record in Redis)."""

    def event(self, text: str) -> None: ...

    def endpoint_seen(self, endpoint: str) -> None: ...

    def stopped(self, reason: str, verified: bool) -> None: ...

    def gone(self, at: float) -> None: ...

    def recovered(self, where: str) -> None: ...

    def heartbeat(self, at: float) -> None: ...

    def cancel_requested(self) -> bool: ...

    def forwarded(self) -> int | None:
        """How far into the VM's console the job's log stream holds (None: not known)."""
        ...


class Watchdog:
    def __init__(
        self, files: JobFiles, spec: WatchSpec, driver: ColabDriver, clock: Clock, sink: WatchSink
    ) -> None:
        self.files, self.spec, self.driver, self.clock, self.sink = files, spec, driver, clock, sink
        self.idle_since: float | None = None
        self.reported: set[str] = set()
        self.last: Decision | None = None
        self.status_errors = 0
        self.vm_seen = Vm.NOT_ASKED
        self.console_bytes = 0  # the VM console's size, as its heartbeat last said

    # --- observing --------------------------------------------------------------------------

    def _record_endpoint(self) -> str | None:
        known = self.files.endpoint(self.spec.session)
        if known:
            return known
        rec = self._local_record_endpoint()
        if rec:
            self.files.record_endpoint(self.spec.session, rec)
            self.sink.endpoint_seen(rec)
            self.sink.event(f"endpoint {rec} recorded for {self.spec.session}")
            return rec
        return None

    def _local_record_endpoint(self) -> str | None:
        try:
            rec = self.driver.local_record(self.spec.session)
        except ColabError:
            return None
        return rec.endpoint if rec and rec.endpoint else None

    def observe(self) -> Observation:
        now = self.clock.time()
        state = self.files.read_runner()
        phase = state.phase if state else Phase.CHECKING
        owner_alive = bool(
            state
            and state.runner
            and state.runner.alive()
            and now - state.beat_at <= self.spec.owner_stale_s
            and phase not in OVER_PHASES
        )
        client_alive = bool(state and state.client and state.client.alive())
        endpoint = self._record_endpoint()
        cancel = self._cancel_requested()
        cli_running = endpoint is None and procs.cli_running(Path(self.spec.config_path))
        base = Observation(
            now, phase, client_alive, owner_alive, endpoint, Seen.NOT_ASKED, None, cancel,
            cli_running=cli_running,
        )  # fmt: skip
        if endpoint is None:
            return base
        seen = self._status(endpoint)
        record = self._local_record_endpoint() if seen is Seen.ERROR else None
        vm = Vm.NOT_ASKED
        if seen is Seen.OURS and needs_vm_heartbeat(base):
            vm = self._vm_heartbeat(now)
        unforwarded = False
        if vm is Vm.FINISHED and not (client_alive or owner_alive):
            # A finished job whose owner died before its console was forwarded: the rest of
            # its lines are for an adopter to forward, within the idle timeout.
            offset = self._forwarded()
            unforwarded = offset is None or offset < self.console_bytes
        return Observation(
            now, phase, client_alive, owner_alive, endpoint, seen, record, cancel, vm,
            cli_running, self.status_errors, unforwarded,
        )  # fmt: skip

    def _forwarded(self) -> int | None:
        try:
            return self.sink.forwarded()
        except Exception:  # Redis down: not known
            return None

    def _status(self, endpoint: str, *, again: bool = False) -> Seen:
        try:
            st = self.driver.status(self.spec.session)
        except ColabError as exc:
            self.status_errors += 1
            self._report_once("status", f"status failed (reported once until it answers): {exc}")
            return Seen.ERROR
        if self.status_errors:
            self.status_errors = 0
            self._report_once("status", "status answers again")
        if st is None:
            # "Not found" may be a record the CLI pruned after a 401 while the VM lives.
            seen = confirm_gone(self.driver, self.spec.session, endpoint, self.sink.event)
            if seen is Witness.UNKNOWN:
                return Seen.ERROR
            if seen is Witness.GONE or again:
                return Seen.GONE
            return self._status(endpoint, again=True)
        return Seen.OURS if st.endpoint == endpoint else Seen.MISMATCH

    def _vm_heartbeat(self, now: float) -> Vm:
        if not self.spec.heartbeat_path:
            return Vm.NOT_ASKED
        try:
            beat = read_beat(self.driver, self.spec.session, self.spec.heartbeat_path, 30.0)
        except (ColabError, OSError) as exc:
            self._report_once("heartbeat", f"the VM heartbeat could not be read: {exc}")
            vm = Vm.ERROR
        else:
            # No heartbeat: the wrapper never started (or this is a fresh VM).
            vm = Vm.SILENT if beat is None else beat.state(now, self.spec.heartbeat_stale_s)
            if beat is not None:
                self.console_bytes = beat.console_bytes
        if vm is not self.vm_seen:
            self.sink.event(f"the VM says: {vm.value}")
            self.vm_seen = vm
        return vm

    def _cancel_requested(self) -> bool:
        try:
            return self.sink.cancel_requested()
        except Exception:  # Redis down: the caps still hold
            return False

    def _report_once(self, kind: str, text: str) -> None:
        """Report a condition when it changes, not on every poll."""
        key = f"{kind}:{text.split(':', 1)[0]}"
        if key not in self.reported:
            self.reported = {r for r in self.reported if not r.startswith(f"{kind}:")}
            self.reported.add(key)
            self.sink.event(text)

    # --- acting -----------------------------------------------------------------------------

    def step(self) -> Decision:
        spec = self.files.read_watch()
        if spec is not None:
            if spec.session != self.spec.session:  # a new segment: a new session to watch
                self.idle_since, self.status_errors, self.vm_seen = None, 0, Vm.NOT_ASKED
            self.spec = spec  # a new segment or owner rewrites it
        obs = self.observe()
        d = decide(
            obs,
            idle_since=self.idle_since,
            idle_timeout_s=self.spec.idle_timeout_s,
            wall_deadline_at=self.spec.wall_deadline_at,
        )
        self.idle_since = d.idle_since
        if d.act is Act.STOP:
            self._stop(obs, d.reason)
        elif d.act is Act.REPORT:
            self._report_once("report", f"NOT stopping {self.spec.session}: {d.reason}")
        now = self.clock.time()
        self.files.write_watchdog(now, f"{d.act.value}: {d.reason}")
        if d.act is Act.EXIT and obs.endpoint is not None and obs.seen is Seen.GONE:
            # Anything still attached to a VM that is gone would only hang and write back.
            procs.kill_job_processes(self.files.root)
            self.files.mark_gone(self.spec.session, now)
            self.sink.gone(now)
        self.sink.heartbeat(now)
        self.last = d
        return d

    def _stop(self, obs: Observation, reason: str) -> None:
        assert obs.endpoint is not None
        at_wall = obs.now >= self.spec.wall_deadline_at
        if obs.vm is Vm.KEPT and not at_wall:
            rec = recover_results(
                self.driver, self.spec.session, self.spec.remote_job_dir, self.files.results,
                log=self.sink.event, lock_path=self.files.recover_lock,
            )  # fmt: skip
            self.sink.event(rec.summary())
            if rec.ok:
                self.sink.recovered(f"{os.uname().nodename}:{rec.local_dir}")
            else:
                return  # keep the VM: it holds the only copy; try again next poll
        self.sink.event(f"stopping {self.spec.session} at {obs.endpoint}: {reason}")
        procs.kill_job_processes(self.files.root)
        try:
            self.driver.stop(self.spec.session)
        except ColabError as exc:
            self.sink.event(f"stop failed (will retry): {exc}")
            return
        verified = self._status(obs.endpoint) is Seen.GONE
        self.sink.stopped(reason, verified)

    def run(self) -> None:
        while True:
            d = self.step()
            if d.act is Act.EXIT:
                self.sink.event(f"watchdog exits: {d.reason}")
                return
            state = self.files.read_runner()
            allocating = state is not None and state.phase is Phase.ALLOCATING
            fast = allocating and self.files.endpoint(self.spec.session) is None
            self.clock.sleep(ALLOCATION_POLL_S if fast else self.spec.poll_s)


# --- the process ------------------------------------------------------------------------------


class RedisSink:
    """Reports to the job's Redis log stream and watch record, and never makes the watchdog wait
    on Redis: once a write fails, Redis is asked again only once a poll (with the heartbeat),
    and what could not be written (events in order, the latest watch fields) is kept and sent
    when it answers. Redis down for minutes costs the watchdog's poll one short try."""

    def __init__(self, job_id: str, feed: Feed) -> None:
        self.job_id = job_id
        self.feed = feed
        self.pending: dict[str, str] = {}
        self.events: list[str] = []
        self.dropped = 0
        self.down = False

    def _send(self) -> None:
        """Everything kept, events first; marks Redis down (or up again) as it finds it."""
        try:
            while self.events:
                self.feed.append_log(self.job_id, f"[watchdog] {self.events[0]}", "watchdog")
                self.events.pop(0)
            if self.dropped:
                text = f"[watchdog] {self.dropped} report(s) of the outage were not kept"
                self.feed.append_log(self.job_id, text, "watchdog")
                self.dropped = 0
            if self.pending:
                self.feed.record_watch(self.job_id, self.pending)
                self.pending = {}
        except Exception as exc:
            if not self.down:
                print(f"watchdog: Redis unreachable (kept for later): {exc}", file=sys.stderr)
            self.down = True
            return
        if self.down:
            print("watchdog: Redis answers again", file=sys.stderr, flush=True)
        self.down = False

    def _flush(self, fields: Mapping[str, str]) -> None:
        self.pending.update(fields)
        if not self.down:
            self._send()

    def event(self, text: str) -> None:
        print(f"watchdog: {text}", flush=True)
        self.events.append(text)
        if len(self.events) > MAX_KEPT_EVENTS:
            self.events.pop(0)
            self.dropped += 1
        if not self.down:
            self._send()

    def endpoint_seen(self, endpoint: str) -> None:
        self._flush({"endpoint": endpoint})

    def stopped(self, reason: str, verified: bool) -> None:
        self._flush({"stopped_reason": reason, "stop_verified": str(verified).lower()})

    def gone(self, at: float) -> None:
        self._flush({"gone_verified_at": repr(at)})

    def recovered(self, where: str) -> None:
        self._flush({"results_local": where})

    def heartbeat(self, at: float) -> None:
        """Once a poll: also the one try while Redis is down."""
        self.pending["heartbeat_at"] = repr(at)
        self._send()

    def forwarded(self) -> int | None:
        if self.down:
            return None
        try:
            return self.feed.log_offset(self.job_id)
        except Exception:
            self.down = True
            return None

    def cancel_requested(self) -> bool:
        if self.down:
            return False  # asked again once Redis answers; the caps hold meanwhile
        try:
            return self.feed.cancel_requested(self.job_id) is not None
        except Exception:
            self.down = True
            raise


def start_watchdog(files: JobFiles, env: Mapping[str, str], *, clock: Clock) -> ProcRef:
    """Start the job's watchdog (or find the live one) and wait until it reports alive."""
    proc, _, _ = files.watchdog()
    if proc is not None and proc.alive():
        return proc
    with open(files.root / "watchdog.log", "ab") as log:
        p = subprocess.Popen(
            [sys.executable, "-m", "worker.session.watchdog", str(files.root)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=dict(env),
            start_new_session=True,
        )  # fmt: skip
    deadline = clock.monotonic() + CONFIRM_TIMEOUT_S
    while clock.monotonic() < deadline:
        proc, beat_at, _ = files.watchdog()
        if proc is not None and proc.pid == p.pid and beat_at > 0 and proc.alive():
            return proc
        if p.poll() is not None:
            break
        clock.sleep(0.05)
    raise WatchdogNotAlive(f"The watchdog for {files.root.name} did not confirm it is alive.")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    files = JobFiles(Path(args[0]))
    spec = files.read_watch()
    if spec is None:
        print(f"watchdog: no watch.json in {files.root}", file=sys.stderr)
        return 2
    from worker.colab.driver import ColabCli
    from worker.records.forward import Feed, feed_settings

    driver = ColabCli(spec.colab_bin, Path(spec.config_path))
    clock = SystemClock()
    files.write_watchdog(clock.time(), "started")
    # Ignore the signals a dying worker's terminal or process group might pass on.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sink = RedisSink(spec.job_id, Feed.build(feed_settings(), retry_s=1.0))
    Watchdog(files, spec, driver, clock, sink).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
