"""The watchdog: one detached process per job that makes sure its session ends (invariant 2).

Started and confirmed alive before `colab new`, in its own process session so that a worker crash
or restart does not take it down (a restarted worker finds it by its pid file). Each poll it
observes (the runner's phase, the exec client's life, the endpoint, `colab status` when it needs
it), asks `watchpolicy.decide`, and acts: a verified stop, after recovering the results of a VM
that holds their only copy; a report; or exit once the session is verified gone.

    python -m worker.session.watchdog JOB_DIR
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from worker.clock import Clock, SystemClock
from worker.colab.driver import ColabDriver
from worker.errors import ColabError, ColabqError
from worker.session.attach import ExecResult
from worker.session.jobfiles import JobFiles, ProcRef, WatchSpec
from worker.session.recovery import recover_results
from worker.session.watchpolicy import Act, Decision, Observation, Phase, Seen, decide, is_busy

ALLOCATION_POLL_S = 0.2  # while `colab new` runs, catch the endpoint the moment it is written
CONFIRM_TIMEOUT_S = 15.0


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


class Watchdog:
    def __init__(
        self, files: JobFiles, spec: WatchSpec, driver: ColabDriver, clock: Clock, sink: WatchSink
    ) -> None:
        self.files, self.spec, self.driver, self.clock, self.sink = files, spec, driver, clock, sink
        self.idle_since: float | None = None
        self.reported: set[str] = set()
        self.last: Decision | None = None

    # --- observing --------------------------------------------------------------------------

    def _record_endpoint(self) -> str | None:
        known = self.files.endpoint()
        if known:
            return known
        rec = self._local_record_endpoint()
        if rec:
            self.files.record_endpoint(rec)
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
        runner_alive = bool(state and state.runner and state.runner.alive())
        client_alive = bool(state and state.client and state.client.alive())
        endpoint = self._record_endpoint()
        cancel = self._cancel_requested()
        partial = Observation(
            now, phase, client_alive, runner_alive, endpoint, Seen.NOT_ASKED, None, cancel
        )
        at_wall = now >= self.spec.wall_deadline_at
        seen = Seen.NOT_ASKED
        if endpoint is not None and (not is_busy(partial) or at_wall or cancel):
            seen = self._status(endpoint)
        record = self._local_record_endpoint() if seen is Seen.ERROR else None
        return Observation(now, phase, client_alive, runner_alive, endpoint, seen, record, cancel)

    def _status(self, endpoint: str) -> Seen:
        try:
            st = self.driver.status(self.spec.session)
        except ColabError as exc:
            self.sink.event(f"status failed: {exc}")
            return Seen.ERROR
        if st is None:
            return Seen.GONE
        return Seen.OURS if st.endpoint == endpoint else Seen.MISMATCH

    def _cancel_requested(self) -> bool:
        try:
            return self.sink.cancel_requested()
        except Exception:  # Redis down: the caps still hold
            return False

    # --- acting -----------------------------------------------------------------------------

    def step(self) -> Decision:
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
        elif d.act is Act.REPORT and d.reason not in self.reported:
            self.reported.add(d.reason)
            self.sink.event(f"NOT stopping {self.spec.session}: {d.reason}")
        now = self.clock.time()
        self.files.write_watchdog(now, f"{d.act.value}: {d.reason}")
        if d.act is Act.EXIT and obs.endpoint is not None:
            self.sink.gone(now)
        self.sink.heartbeat(now)
        self.last = d
        return d

    def _stop(self, obs: Observation, reason: str) -> None:
        assert obs.endpoint is not None
        at_wall = obs.now >= self.spec.wall_deadline_at
        result = ExecResult.load(self.files.exec_result)
        if result and result.sentinels.get("FINAL_UPLOAD") == "failed" and not at_wall:
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
        try:
            self.driver.stop(self.spec.session)
        except ColabError as exc:
            self.sink.event(f"stop failed (will retry): {exc}")
            return
        verified = self._status(obs.endpoint) is Seen.GONE
        self.sink.stopped(reason, verified)
        state = self.files.read_runner()
        if state and state.client and state.client.alive():
            os.kill(state.client.pid, signal.SIGKILL)

    def run(self) -> None:
        while True:
            d = self.step()
            if d.act is Act.EXIT:
                self.sink.event(f"watchdog exits: {d.reason}")
                return
            state = self.files.read_runner()
            allocating = state is not None and state.phase is Phase.ALLOCATING
            fast = allocating and self.files.endpoint() is None
            self.clock.sleep(ALLOCATION_POLL_S if fast else self.spec.poll_s)


# --- the process ------------------------------------------------------------------------------


class RedisSink:
    """Reports to the job's Redis log stream and watch record; never fails the watchdog."""

    def __init__(self, job_id: str) -> None:
        from worker.deps import build_ledger
        from worker.settings import load_settings

        self.job_id = job_id
        self.ledger = build_ledger(load_settings())

    def _safe(self, fn: object, *args: object) -> None:
        try:
            fn(*args)  # type: ignore[operator]
        except Exception as exc:
            print(f"watchdog: Redis write failed: {exc}", file=sys.stderr, flush=True)

    def event(self, text: str) -> None:
        print(f"watchdog: {text}", flush=True)
        self._safe(self.ledger.append_log, self.job_id, f"[watchdog] {text}", "watchdog")

    def endpoint_seen(self, endpoint: str) -> None:
        self._safe(self.ledger.record_watch, self.job_id, {"endpoint": endpoint})

    def stopped(self, reason: str, verified: bool) -> None:
        fields = {"stopped_reason": reason, "stop_verified": str(verified).lower()}
        self._safe(self.ledger.record_watch, self.job_id, fields)

    def gone(self, at: float) -> None:
        self._safe(self.ledger.record_watch, self.job_id, {"gone_verified_at": repr(at)})

    def recovered(self, where: str) -> None:
        self._safe(self.ledger.record_watch, self.job_id, {"results_local": where})

    def heartbeat(self, at: float) -> None:
        self._safe(self.ledger.record_watch, self.job_id, {"heartbeat_at": repr(at)})

    def cancel_requested(self) -> bool:
        return self.ledger.cancel_requested(self.job_id) is not None


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

    driver = ColabCli(spec.colab_bin, Path(spec.config_path))
    clock = SystemClock()
    files.write_watchdog(clock.time(), "started")
    # Ignore the signals a dying worker's terminal or process group might pass on.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    Watchdog(files, spec, driver, clock, RedisSink(spec.job_id)).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
