"""The session runner: drives one job from the state the ledger records to a terminal state.

The same loop serves the worker that claimed the job and any later owner that adopted it (a
restarted worker, the janitor on another host): each state has one step, and each step reads
what it needs from the ledger, so an owner that dies anywhere leaves its successor a job it can
finish. The run itself lives on the VM:

    ALLOCATING  checks -> watchdog alive -> `colab new` (endpoint recorded at once)
    STARTING    one bundle upload -> the launch cell starts the wrapper detached, once
    RUNNING     attach clients follow the console (re-attached if they die) until the job's end,
                a cancel, the wall cap or a lost VM
    PERSISTING  the session is stopped at once (the final upload succeeded) while the store
                verifies the artifacts
    RETAINED    the final upload failed: the VM's copy of the results is recovered first
    RELEASING   the job's exec clients killed, the session verified gone, the pending outcome
                recorded with the report (or a new segment, when a lost VM may restart)
    RESTARTING  a new session resumes from the last synced checkpoint

Every side effect passes the lease's fence first; every state change goes through the ledger's
`transition()` with this owner's token. An owner that loses its lease, or Redis for longer than
`redis_retry_s`, stops acting and hands the session to the watchdog.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis

from worker.clock import Clock
from worker.colab.driver import ColabDriver
from worker.colab.release import ReleaseOutcome, release_session
from worker.errors import (
    AcceleratorRejected,
    AllocationRefused,
    BudgetExceeded,
    ColabError,
    ColabqError,
    RemotePathNotFound,
    StaleOwner,
)
from worker.records.lease import LeaseLost
from worker.records.ledger import JobRecord, Ledger
from worker.records.logship import LogShipper
from worker.session import checks, procs
from worker.session import plan as vmplan
from worker.session.attach import AttachSpec
from worker.session.follow import Ended, Follower, Spawner
from worker.session.jobfiles import JobFiles, ProcRef, WatchSpec
from worker.session.recovery import recover_results
from worker.session.watchpolicy import Phase
from worker.settings import Settings
from worker.spec import KILL_AFTER_S, JobSpec, reserve_s
from worker.states import HOLDS_SESSION, TERMINAL, can_transition
from worker.states import JobState as S
from worker.store.artifacts import ArtifactStore

WatchdogStarter = Callable[[JobFiles, Mapping[str, str]], object]
InputChecker = Callable[[str], int]  # an hf:// URI -> its bytes; raises if missing or empty
Fence = Callable[[], None]
LAUNCH_TIMEOUT_S = 120.0
# Redis errors that outlasted the client's retries: the owner can record nothing any more.
REDIS_DOWN = (redis.ConnectionError, redis.TimeoutError)


def spawn_detached(argv: list[str], log_path: Any, env: Mapping[str, str]) -> ProcRef:
    """Start an attach client in a process session of its own: it outlives this worker, and
    one `killpg` ends it with its `colab exec`."""
    import subprocess

    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=dict(env),
            start_new_session=True,
        )  # fmt: skip
    ref = ProcRef.of(proc.pid)
    threading.Thread(target=proc.wait, daemon=True).start()  # reap it, never a zombie
    return ref or ProcRef(proc.pid, -1)


@dataclass(frozen=True)
class RunnerDeps:
    clock: Clock
    ledger: Ledger
    driver: ColabDriver
    store: ArtifactStore
    settings: Settings
    files: JobFiles
    start_watchdog: WatchdogStarter
    check_input: InputChecker
    spawn: Spawner = spawn_detached
    worker_name: str = "worker"
    # Told of every state change after it is recorded (the Celery task sends it to Flower).
    on_state: Callable[[S, str], None] = lambda state, reason: None
    # The lease's fence; the default trusts the per-job lock alone (tests without a lease).
    fence: Fence = lambda: None


@dataclass(frozen=True)
class Outcome:
    state: S
    reason: str
    exit_code: int | None = None
    report: Mapping[str, object] = field(default_factory=dict)
    handed_over: bool = False


class _Finish(Exception):
    """Internal: end the run in `state` (after releasing whatever session is held)."""

    def __init__(self, state: S, reason: str) -> None:
        super().__init__(reason)
        self.state, self.reason = state, reason


def session_name(prefix: str) -> str:
    """An owned name: colabq's prefix plus 128 random bits (ownership is proven by it later)."""
    return f"{prefix}{secrets.token_hex(16)}"


class Runner:
    def __init__(self, spec: JobSpec, owner: str, deps: RunnerDeps) -> None:
        self.spec, self.owner, self.d = spec, owner, deps
        self.files = deps.files
        self.job_id = spec.job_id
        self.name: str | None = None
        self.endpoint: str | None = None
        self.exit_code: int | None = None
        self.released: ReleaseOutcome | None = None
        self.results_local: str | None = None
        self.notes: list[str] = []
        self.nonce = secrets.token_hex(8)
        self.deadline_at = 0.0
        self.segment = 0
        self.restarts = 0
        self.resume_uri: str | None = None
        self._early_release: threading.Thread | None = None
        self._early_error: ColabqError | None = None
        self.adopted = False
        self._ship = LogShipper(deps.ledger, spec.job_id)

    # --- helpers ----------------------------------------------------------------------------

    def _to(self, state: S, reason: str, **fields: str) -> None:
        self.d.ledger.transition(self.job_id, state, owner=self.owner, reason=reason, fields=fields)
        try:
            self.d.on_state(state, reason)
        except Exception as exc:  # monitoring must never fail a job
            self.log(f"could not publish the state change: {exc}")

    def _phase(self, phase: Phase) -> None:
        self.files.write_runner(phase)

    def log(self, text: str) -> None:
        """Never waits on Redis (a release that logs must still stop the session now)."""
        print(f"colabq {self.job_id}: {text}", file=sys.stderr, flush=True)
        self._ship(f"[colabq] {text}")

    def _cancelled(self) -> str | None:
        return self.d.ledger.cancel_requested(self.job_id)

    def _child_env(self) -> dict[str, str]:
        return {
            **self.d.driver.exec_env(),
            "COLABQ_REDIS_URL": self.d.settings.redis_url,
            "COLABQ_KEY_PREFIX": self.d.settings.key_prefix,
            "COLABQ_REDIS_RETRY_S": repr(self.d.settings.redis_retry_s),
        }

    def _holds_session(self) -> bool:
        return self.name is not None and self.endpoint is not None

    # --- entry points -----------------------------------------------------------------------

    def run(self) -> Outcome:
        """A job this worker just claimed (QUEUED, owned by us)."""
        # The wall cap counts from before allocation, whatever the later steps take.
        self.deadline_at = self.d.clock.time() + self.spec.wall_cap_s
        self.files.ensure()
        self._phase(Phase.CHECKING)
        self.d.ledger.start_segment(self.job_id, self.owner, 0)
        self._to(
            S.ALLOCATING,
            f"claimed by {self.d.worker_name}",
            worker=self.d.worker_name,
            wall_deadline_at=repr(self.deadline_at),
            nonce=self.nonce,
            segment="0",
            restarts="0",
        )
        return self._drive()

    def resume(self) -> Outcome:
        """A job adopted from a dead owner: carry on from the state the ledger records."""
        rec = self.d.ledger.get(self.job_id)
        self.adopted = True
        self.files.ensure()
        self.deadline_at = float(
            rec.get("wall_deadline_at") or rec.created_at + self.spec.wall_cap_s
        )
        self.nonce = rec.get("nonce") or self.nonce
        self.name = rec.get("session")
        self.segment = int(rec.get("segment") or 0)
        self.restarts = int(rec.get("restarts") or 0)
        self.exit_code = _int(rec.get("exit_code"))
        self.results_local = rec.get("results_local")
        if self.name is not None:
            self.endpoint = rec.get("endpoint") or self.files.endpoint(self.name)
            if self.endpoint is None:
                self._record_endpoint()
        self.d.ledger.set_fields(self.job_id, owner=self.owner, worker=self.d.worker_name)
        self.log(f"adopted by {self.d.worker_name} in state {rec.state.name}")
        if self.name is not None and rec.state in HOLDS_SESSION | {S.ALLOCATING}:
            # This host's watchdog enforces the caps from now on (a live one is reused).
            self._write_watch()
            self.d.start_watchdog(self.files, self._child_env())
        return self._drive()

    # --- the loop ---------------------------------------------------------------------------

    def _drive(self) -> Outcome:
        steps: dict[S, Callable[[JobRecord], None]] = {
            S.ALLOCATING: self._allocate,
            S.STARTING: self._start,
            S.RUNNING: self._follow,
            S.PERSISTING: self._persist,
            S.RETAINED: self._recover,
            S.RELEASING: self._release,
            S.RESTARTING: self._restart,
        }
        try:
            while True:
                rec = self.d.ledger.get(self.job_id)
                if rec.state in TERMINAL:
                    self._ship.close()
                    return self._outcome(rec)
                try:
                    self._guard(rec)
                    steps[rec.state](rec)
                except _Finish as f:
                    self._finish(f.state, f.reason)
                except (LeaseLost, StaleOwner, *REDIS_DOWN):
                    raise
                except ColabqError as exc:
                    self._finish(S.FAILED, exc.advice())
                except Exception as exc:  # a bug must still end in a released session
                    self._finish(S.FAILED, f"internal error: {type(exc).__name__}: {exc}")
        except (LeaseLost, StaleOwner) as exc:
            return self._hand_over(str(exc))
        except REDIS_DOWN as exc:
            budget = self.d.settings.redis_retry_s
            return self._hand_over(f"Redis unreachable for {budget:.0f}s: {exc}")

    def _guard(self, rec: JobRecord) -> None:
        """Before each step: the lease, a cancel, the wall cap."""
        self.d.fence()
        if rec.state is S.RELEASING:
            return
        if reason := self._cancelled():
            raise _Finish(S.CANCELLED, f"cancelled: {reason}")
        if self.d.clock.time() >= self.deadline_at:
            raise _Finish(S.TIMED_OUT, f"wall cap {self.spec.wall_cap_s:.0f}s reached")

    def _finish(self, state: S, reason: str) -> None:
        """End in `state`: through RELEASING when a session may be held (or the direct edge
        does not exist), else at once."""
        rec = self.d.ledger.get(self.job_id)
        if rec.state in TERMINAL:
            return
        if rec.state is S.RELEASING:
            # Already releasing: a failure here is recorded as this outcome, not a new one.
            self._record_pending(state, reason)
            return
        if self.name is not None and self.endpoint is None and rec.state is not S.RESTARTING:
            self._record_endpoint()
        holds = rec.state is not S.RESTARTING and (
            self._holds_session() or rec.state in HOLDS_SESSION
        )
        if (holds or not can_transition(rec.state, state)) and can_transition(
            rec.state, S.RELEASING
        ):
            self._to(
                S.RELEASING, f"releasing {self.name}: {reason}",
                pending_outcome=state.value, pending_reason=reason,
            )  # fmt: skip
            return
        if not can_transition(rec.state, state):
            state, reason = S.FAILED_LOST, f"{reason} (recorded as FAILED_LOST from {rec.state})"
        self._phase(Phase.DONE)
        report = self._report(state, reason)
        self._to(state, reason, report=json.dumps(report), outcome=state.value)

    def _record_pending(self, state: S, reason: str) -> None:
        self.d.ledger.set_fields(
            self.job_id, owner=self.owner, pending_outcome=state.value, pending_reason=reason
        )

    def _hand_over(self, reason: str) -> Outcome:
        """Stop acting: the watchdog decides for the session (a stale owner is not busy), and
        the janitor adopts the job once the lease has expired."""
        self._phase(Phase.HANDED_OVER)
        self._ship.close(timeout_s=1.0)
        print(f"colabq runner {self.job_id}: handed over: {reason}", file=sys.stderr, flush=True)
        return Outcome(S.RUNNING, f"handed over: {reason}", self.exit_code, handed_over=True)

    # --- ALLOCATING -------------------------------------------------------------------------

    def _allocate(self, rec: JobRecord) -> None:
        d, spec = self.d, self.spec
        if self.name is not None:
            # An adopted job whose owner died during allocation.
            if self.endpoint is None and not self._wait_for_endpoint():
                raise _Finish(
                    S.FAILED_LOST,
                    f"the owner died while allocating {self.name}; no endpoint was recorded, so "
                    "an assignment it may have made shows as [?] in `colab sessions`",
                )
            self._to(S.STARTING, f"session {self.name} at {self.endpoint}")
            return
        self._phase(Phase.CHECKING)
        balance = self._check_before_allocation()
        self.name = session_name(d.settings.session_prefix)
        self._write_watch()
        try:
            d.start_watchdog(self.files, self._child_env())
        except ColabqError as exc:
            raise _Finish(S.FAILED, f"pre-allocation check failed: {exc.advice()}") from None
        self.log(f"checks passed (colab {d.settings.colab_version}, balance {balance:.2f} units)")
        self.log("watchdog alive")
        d.fence()
        d.ledger.set_fields(self.job_id, owner=self.owner, session=self.name)
        self._phase(Phase.ALLOCATING)
        self.log(f"allocating {spec.gpu}{' high-mem' if spec.high_mem else ''} as {self.name}")
        try:
            d.driver.new(self.name, spec.gpu.value, spec.high_mem)
        except (AllocationRefused, AcceleratorRejected) as exc:
            self._record_endpoint()
            raise _Finish(S.FAILED_NO_GPU, f"no GPU: {exc}") from None
        except ColabError as exc:
            self._record_endpoint()
            raise _Finish(S.FAILED, f"allocation failed: {exc.advice()}") from None
        if not self._record_endpoint():
            raise _Finish(S.FAILED, "colab new said READY but recorded no endpoint")
        self._to(S.STARTING, f"session {self.name} at {self.endpoint}")

    def _check_before_allocation(self) -> float:
        # Invariant 1: nothing is allocated before these pass, the watchdog included.
        d, spec = self.d, self.spec
        try:
            launch = vmplan.launch_source(spec, d.settings, self.nonce, self._segment_plan())
            checks.check_job_files(spec, self.files.root, vmplan.VM_DIR, launch)
            if d.settings.hf_token_file is not None:
                checks.check_token_file(d.settings.hf_token_file)
            elif spec.artifact.kind == "hf":
                raise _Finish(
                    S.FAILED, "a Hub destination needs COLABQ_HF_TOKEN_FILE on the worker host"
                )
            dest = d.store.check_destination(spec.artifact)
            self.log(f"destination: {dest}")
            if self.resume_uri is None and spec.resume_from:
                size = d.check_input(spec.resume_from)
                self.log(f"resume checkpoint {spec.resume_from}: {size} bytes")
            checks.check_cli_version(d.driver, d.settings.colab_version)
            return checks.check_budget(d.driver, spec.budget_units, d.settings.budget_floor_units)
        except BudgetExceeded as exc:
            raise _Finish(S.FAILED_BUDGET, exc.advice()) from None
        except ColabqError as exc:
            raise _Finish(S.FAILED, f"pre-allocation check failed: {exc.advice()}") from None

    def _write_watch(self) -> None:
        assert self.name is not None
        s = self.d.settings
        self.files.write_watch(
            WatchSpec(
                job_id=self.job_id,
                session=self.name,
                colab_bin=s.colab_bin,
                config_path=str(self.d.driver.config_path),
                wall_deadline_at=self.deadline_at,
                idle_timeout_s=self.spec.idle_timeout_s,
                poll_s=s.watchdog_poll_s,
                remote_job_dir=vmplan.remote_job_dir(self.job_id),
                heartbeat_path=vmplan.remote_heartbeat(self.job_id),
                heartbeat_stale_s=s.vm_heartbeat_stale_s,
                owner_stale_s=max(3 * s.heartbeat_interval_s, 10.0),
            )
        )

    def _record_endpoint(self) -> bool:
        """Record the assigned endpoint durably the moment the CLI's own state shows it (the
        watchdog does the same while `colab new` runs)."""
        assert self.name is not None
        endpoint = self.files.endpoint(self.name)
        if endpoint is None:
            try:
                rec = self.d.driver.local_record(self.name)
            except ColabError:
                rec = None
            if rec is None or not rec.endpoint:
                return False
            endpoint = rec.endpoint
            self.files.record_endpoint(self.name, endpoint)
        self.endpoint = endpoint
        self.d.ledger.set_fields(self.job_id, owner=self.owner, endpoint=endpoint)
        return True

    def _wait_for_endpoint(self) -> bool:
        """Adoption: a `colab new` the dead owner started may still be writing its state."""
        assert self.name is not None
        while procs.cli_running(self.d.driver.config_path):
            self.d.clock.sleep(0.5)
        return self._record_endpoint()

    # --- STARTING ---------------------------------------------------------------------------

    def _start(self, rec: JobRecord) -> None:
        d, name = self.d, self.name
        assert name is not None
        self._phase(Phase.UPLOADING)
        if not (self.adopted and self._launched()):
            bundle = vmplan.write_bundle(
                self.files.root / vmplan.BUNDLE,
                vmplan.bundle_members(self.files.root / vmplan.SCRIPT, d.settings.hf_token_file),
            )
            try:
                d.fence()
                d.driver.upload(name, bundle, f"/content/{vmplan.BUNDLE}")
            finally:
                bundle.unlink(missing_ok=True)
            launch = self.files.root / f"launch-{self.segment}.py"
            launch.write_text(
                vmplan.launch_source(self.spec, d.settings, self.nonce, self._segment_plan())
            )
            d.fence()
            out = d.driver.exec(name, launch, LAUNCH_TIMEOUT_S)
            launched = _sentinel(out, self.nonce, "LAUNCHED")
            if launched is None:
                raise ColabqError(f"the launch cell did not start the job: {out.strip()[-300:]}")
            self.log(f"launched on the VM (wrapper pid {launched})")
        self._to(S.RUNNING, f"started detached on {name}")

    def _launched(self) -> bool:
        """Whether the wrapper was started already (an adopter's question: never twice)."""
        if self.d.ledger.read_watch(self.job_id).get("exec_launched"):
            return True
        assert self.name is not None
        marker = self.files.root / "launched-probe"
        try:
            self.d.driver.download(
                self.name,
                f"{vmplan.remote_job_dir(self.job_id)}/run/launched",
                marker,
                timeout_s=self.d.settings.colab_call_timeout_s,
            )
        except RemotePathNotFound:
            return False
        finally:
            marker.unlink(missing_ok=True)
        return True

    # --- RUNNING ----------------------------------------------------------------------------

    def _follow(self, rec: JobRecord) -> None:
        d = self.d
        assert self.name is not None
        remaining = max(self.deadline_at - d.clock.time(), 1.0)
        follower = Follower(
            job_id=self.job_id, session=self.name, files=self.files, ledger=d.ledger,
            driver=d.driver, clock=d.clock, spawn=d.spawn, env=self._child_env(),
            attach=AttachSpec(
                self.job_id, self.name, self.nonce, self.segment, d.settings.colab_bin,
                str(d.driver.config_path), remaining + 120.0,
            ),
            deadline_at=self.deadline_at, poll_s=d.settings.poll_interval_s,
            backoff_max_s=d.settings.reattach_backoff_max_s, fence=d.fence, log=self.log,
            cancelled=self._cancelled, stale_cells=self.adopted,
            stall_s=d.settings.attach_stall_s,
            heartbeat_path=vmplan.remote_heartbeat(self.job_id),
        )  # fmt: skip
        result = follower.run()
        self._phase(Phase.FINISHING)
        if result.ended is Ended.CANCELLED:
            raise _Finish(S.CANCELLED, result.reason)
        if result.ended is Ended.WALL_CAP:
            raise _Finish(S.TIMED_OUT, self._wall_reason())
        if result.ended is Ended.SESSION_GONE:
            self._session_gone(result.reason)
            return
        self._job_ended()

    def _job_ended(self) -> None:
        """The wrapper's end was forwarded: classify it from its sentinels."""
        w = self.d.ledger.read_watch(self.job_id)
        self.exit_code = _int(w.get("exec_exit"))
        if w.get("exec_not_launched"):
            raise _Finish(S.FAILED, "the job was never started on the VM")
        if w.get("exec_first_upload") == "failed":
            raise _Finish(S.FAILED, "the first upload failed on the VM; the job did not run")
        if w.get("exec_resume") == "failed":
            raise _Finish(S.FAILED, "the resume checkpoint could not be downloaded on the VM")
        if self.exit_code is None:
            raise _Finish(S.FAILED, "the wrapper on the VM ended without the job's exit status")
        self.log(f"job exited {self.exit_code}")
        if w.get("exec_final_upload") != "ok":
            self._to(S.RETAINED, "final upload failed on the VM; recovering the results")
            return
        # The results are in the store: stop paying for the VM while the store verifies them.
        self._early_release = threading.Thread(target=self._release_now, daemon=True)
        self._early_release.start()
        self._to(S.PERSISTING, f"job exited {self.exit_code}; verifying artifacts")

    def _session_gone(self, how: str) -> None:
        """The VM went away before the job's end reached us: ended (self-released after its
        final upload), or lost (preempted, reclaimed, stopped elsewhere)."""
        v = self._verify_quietly()
        if v is not None and v.exit_code is not None:
            self.exit_code = v.exit_code
            self.log(f"the VM is gone ({how}); the store has the job's exit code {v.exit_code}")
            self._to(S.PERSISTING, f"job exited {self.exit_code}; verifying artifacts")
            return
        synced = v.summary() if v is not None else "the store could not be read"
        reason = f"the VM was lost ({how}) before the job ended; last synced: {synced}"
        if self.restarts < self.spec.max_restarts:
            raise _Finish(S.RESTARTING, reason)
        raise _Finish(S.VM_LOST, reason)

    def _verify_quietly(self) -> Any:
        try:
            return self.d.store.verify(self.spec)
        except ColabqError:
            return None

    def _wall_reason(self) -> str:
        v = self._verify_quietly()
        synced = v.summary() if v is not None else "the store could not be read"
        return f"wall cap {self.spec.wall_cap_s:.0f}s reached; last synced: {synced}"

    # --- PERSISTING / RETAINED --------------------------------------------------------------

    def _persist(self, rec: JobRecord) -> None:
        if self.exit_code is None:
            self.exit_code = _int(self.d.ledger.read_watch(self.job_id).get("exec_exit"))
        try:
            v = self.d.store.verify(self.spec)
        except ColabqError as exc:
            raise _Finish(
                S.FAILED, f"job exited {self.exit_code} but artifacts could not be verified: {exc}"
            ) from None
        self.log(v.summary())
        if self.exit_code is None:
            self.exit_code = v.exit_code
        if not v.ok:
            raise _Finish(S.FAILED, f"job exited {self.exit_code} but artifacts are {v.summary()}")
        if self.exit_code != 0:
            raise _Finish(S.FAILED, f"job exited {self.exit_code}")
        raise _Finish(S.SUCCEEDED, "exit 0, artifacts verified, session released")

    def _recover(self, rec: JobRecord) -> None:
        """The VM kept itself because the final upload failed: copy its results here, then
        let it be released (invariant 4)."""
        assert self.name is not None
        if self.exit_code is None:
            self.exit_code = _int(self.d.ledger.read_watch(self.job_id).get("exec_exit"))
        self._phase(Phase.RECOVERING)
        self.d.fence()
        got = recover_results(
            self.d.driver, self.name, vmplan.remote_job_dir(self.job_id), self.files.results,
            log=self.log, lock_path=self.files.recover_lock,
        )  # fmt: skip
        self.log(got.summary())
        self._phase(Phase.FINISHING)
        if not got.ok:
            raise _Finish(
                S.FAILED_LOST, f"final upload failed and recovery failed: {got.summary()}"
            )
        self.results_local = f"{os.uname().nodename}:{got.local_dir}"
        self.d.ledger.set_fields(self.job_id, owner=self.owner, results_local=self.results_local)
        raise _Finish(
            S.FAILED,
            f"job exited {self.exit_code} but the final upload failed; results recovered to "
            f"{self.results_local}",
        )

    # --- RELEASING --------------------------------------------------------------------------

    def _release_now(self) -> None:
        """Kill the job's exec clients (a real `colab exec` outliving its session writes its
        record back), then the verified stop."""
        assert self.name is not None and self.endpoint is not None
        procs.kill_job_processes(self.files.root)
        try:
            self.released = release_session(
                self.d.driver, self.name, self.endpoint, clock=self.d.clock, log=self.log
            )
        except ColabqError as exc:
            self._early_error = exc

    def _release(self, rec: JobRecord) -> None:
        state = S(rec.get("pending_outcome") or S.FAILED_LOST.value)
        reason = rec.get("pending_reason") or rec.reason
        if self.name is None and rec.get("session"):
            self.name = rec.get("session")
        if self.name is not None and self.endpoint is None:
            self._record_endpoint()
        self._phase(Phase.FINISHING)
        if self._early_release is not None:
            self._early_release.join()
            self._early_release = None
        elif self._holds_session():
            self.d.fence()
            self._release_now()
        if self._early_error is not None:
            reason = f"{reason}; RELEASE NOT VERIFIED: {self._early_error.advice()}"
            state = S.FAILED_LOST if state is S.SUCCEEDED else state
            self.released = None
        if self._holds_session() and self.released is None and self._early_error is None:
            self.released = ReleaseOutcome.ALREADY_GONE
        if state is not S.RESTARTING and (why := self._cancelled()):
            # A cancel wins whatever else was about to happen (the job's exit, a failure).
            reason = (
                f"cancelled: {why} ({reason})" if not reason.startswith("cancelled") else reason
            )
            state = S.CANCELLED
        if state is S.RESTARTING:
            if self._early_error is not None:
                state = S.VM_LOST  # never a second session while the first is not verified gone
            else:
                self._to(S.RESTARTING, reason)
                return
        procs.kill_job_processes(self.files.root, everything=True)
        self._phase(Phase.DONE)
        report = self._report(state, reason)
        fields = {"report": json.dumps(report), "outcome": state.value}
        if self.exit_code is not None:
            fields["exit_code"] = str(self.exit_code)
        self._to(state, reason, **fields)

    # --- RESTARTING -------------------------------------------------------------------------

    def _restart(self, rec: JobRecord) -> None:
        """A new segment: a new session, resumed from the last synced checkpoint."""
        self.restarts = int(rec.get("restarts") or 0) + 1
        self.segment = self.restarts
        self.name, self.endpoint, self.exit_code, self.released = None, None, None, None
        self._early_error = None
        self.resume_uri = self.d.store.checkpoint_uri(self.spec)
        where = self.resume_uri or self.spec.resume_from or "the start (nothing synced yet)"
        self.d.ledger.start_segment(self.job_id, self.owner, self.segment)
        self._to(
            S.ALLOCATING,
            f"restart {self.restarts} of {self.spec.max_restarts}: resuming from {where}",
            segment=str(self.segment),
            restarts=str(self.restarts),
        )

    def _segment_plan(self) -> vmplan.Segment:
        if self.segment == 0:
            return vmplan.Segment()
        left = self.deadline_at - self.d.clock.time()
        ttl = left - reserve_s(self.spec.wall_cap_s) - KILL_AFTER_S
        return vmplan.Segment(self.segment, min(self.spec.ttl_s, max(ttl, 1.0)), self.resume_uri)

    # --- the end ----------------------------------------------------------------------------

    def _outcome(self, rec: JobRecord) -> Outcome:
        report = json.loads(rec.get("report") or "{}")
        return Outcome(rec.state, rec.reason, _int(rec.get("exit_code")), report)

    def _report(self, state: S, reason: str) -> dict[str, object]:
        spec = self.spec
        released = self.released.value if self.released else None
        remaining = None if (self.endpoint is None or released) else self.endpoint
        if remaining:
            next_action = (
                f"session {self.name} may still hold {remaining}: check `colab sessions` on "
                f"{self.d.worker_name} and stop it"
            )
        elif self.results_local:
            next_action = f"results are on {self.results_local}: upload them, then resubmit"
        elif state is S.SUCCEEDED:
            next_action = "none"
        elif state is S.VM_LOST:
            next_action = (
                f"resubmit with `--resume-from {spec.job_id}` (or `--max-restarts N` to let "
                "colabq restart a lost VM itself)"
            )
        elif state is S.CANCELLED:
            next_action = "none (cancelled)"
        else:
            next_action = f"read `colabq logs {spec.job_id}`, fix, and resubmit"
        return {
            "job_id": spec.job_id,
            "run_name": spec.run_name,
            "commit": spec.commit,
            "outcome": state.value,
            "reason": reason,
            "exit_code": self.exit_code,
            "artifacts": self.d.store.location(spec),
            "results_local": self.results_local,
            "session": self.name,
            "endpoint": self.endpoint,
            "restarts": self.restarts,
            "runtime": released or ("never allocated" if self.endpoint is None else "UNKNOWN"),
            "remaining_endpoint": remaining,
            "notes": self.notes,
            "next_action": next_action,
        }


def _int(value: str | None) -> int | None:
    if value is None or not value.lstrip("-").isdigit():
        return None
    return int(value)


def _sentinel(output: str, nonce: str, what: str) -> str | None:
    prefix = f"__COLABQ_{nonce}_{what}__="
    for line in output.splitlines():
        if line.startswith(prefix):
            return line[len(prefix) :].strip()
    return None


def run_job(spec: JobSpec, owner: str, deps: RunnerDeps) -> Outcome:
    return Runner(spec, owner, deps).run()


def resume_job(spec: JobSpec, owner: str, deps: RunnerDeps) -> Outcome:
    return Runner(spec, owner, deps).resume()
