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
`transition()` with this owner's token. An owner that loses its lease to another stops acting and
hands the session to the watchdog. An owner that loses Redis for longer than `redis_retry_s`
waits for it (`_wait_out_outage`), however long: the job runs on on its VM, the watchdog enforces
its caps meanwhile, and when Redis answers and the lease is this owner's again (taken back if the
job still names it) the loop carries on from the state the ledger records, re-attaching from the
recorded console offset; if another owner took the job meanwhile, this one stops.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

from worker.errors import ColabqError, JobNotFound, StaleOwner
from worker.fleet.causes import PutBack
from worker.progress.guard import ProgressGuard
from worker.records.lease import LeaseLost, LeaseUnconfirmed
from worker.records.record import JobRecord
from worker.session import plan as vmplan
from worker.session.attach import AttachSpec
from worker.session.follow import Ended, Follower
from worker.session.giveback import GivingBack
from worker.session.job import REDIS_DOWN, Claimed, Finish, Outcome, RunnerDeps, to_int
from worker.session.start import Starting
from worker.session.watchpolicy import Phase
from worker.spec import JobSpec
from worker.states import HOLDS_SESSION, TERMINAL, can_transition
from worker.states import JobState as S

__all__ = ["Outcome", "Runner", "RunnerDeps", "resume_job", "run_job"]


class Runner(Starting, GivingBack):
    # Set by an outage: the attach client may have given up, its cell still in the kernel.
    _outage_seen = False

    def run(self, claimed: Claimed | None = None) -> Outcome:
        """A job this worker just claimed: QUEUED and owned by us, or already ALLOCATING when
        the claim made the first state change too (`claimed`)."""
        self.files.ensure()
        self._phase(Phase.CHECKING)
        if claimed is not None:
            self.deadline_at, self.nonce = claimed.deadline_at, claimed.nonce
            self._told(S.ALLOCATING, f"claimed by {self.d.worker_name}")
            return self._drive()
        # The wall cap counts from before allocation, whatever the later steps take.
        self.deadline_at = self.d.clock.time() + self.spec.wall_cap_s
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
        # This owner is alive and busy before its watchdog starts: a watchdog that looked
        # first would find a finished job with no owner and stop the VM before the rest of its
        # output was forwarded.
        self._phase(Phase.CHECKING)
        self.deadline_at = float(
            rec.get("wall_deadline_at") or rec.created_at + self.spec.wall_cap_s
        )
        self.nonce = rec.get("nonce") or self.nonce
        self.name = rec.get("session")
        self.segment = int(rec.get("segment") or 0)
        self.gpu = rec.get("gpu") or self.spec.gpu.value
        self.restarts = int(rec.get("restarts") or 0)
        self.exit_code = to_int(rec.get("exit_code"))
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

    def _drive(self) -> Outcome:
        while True:
            try:
                return self._steps()
            except (LeaseUnconfirmed, *REDIS_DOWN) as exc:
                if not self._wait_out_outage(f"{type(exc).__name__}: {exc}"):
                    return self._hand_over("the job is owned by another runner now")
            except (LeaseLost, StaleOwner) as exc:
                return self._hand_over(str(exc))

    def _steps(self) -> Outcome:
        steps: dict[S, Callable[[JobRecord], None]] = {
            S.ALLOCATING: self._allocate,
            S.STARTING: self._start,
            S.RUNNING: self._follow,
            S.PERSISTING: self._persist,
            S.RETAINED: self._recover,
            S.RELEASING: self._release,
            S.RESTARTING: self._restart,
        }
        while True:
            rec = self.d.ledger.get(self.job_id)
            if rec.state in TERMINAL:
                self._ship.close()
                return self._outcome(rec)
            try:
                self._guard(rec)
                steps[rec.state](rec)
            except Finish as f:
                self._finish(f.state, f.reason, f.cause)
            except PutBack as p:
                return self._put_back(p)
            except (LeaseLost, StaleOwner, *REDIS_DOWN):
                raise
            except ColabqError as exc:
                self._finish(S.FAILED, exc.advice())
            except Exception as exc:  # a bug must still end in a released session
                self._finish(S.FAILED, f"internal error: {type(exc).__name__}: {exc}")

    def _wait_out_outage(self, why: str) -> bool:
        """Redis stayed away past `redis_retry_s`: wait until it answers and this owner's lease
        is confirmed again. True to carry on; False if another owner holds the job now.

        Meanwhile the owner's phase says it waits (alive, not busy): the watchdog asks the VM
        whether the job runs, enforces the idle timeout and the wall cap, and never stops a
        job that runs. The attach client gives up after its own retry budget (the lines stay on
        the VM); its cell may still run in the kernel, so the next attach clears it first."""
        before = self.files.read_runner()
        self._phase(Phase.AWAITING_REDIS)
        self._outage_seen = True
        started = self.d.clock.monotonic()
        self.log(f"Redis unreachable ({why[:300]}); waiting for it, the job runs on its VM")
        pause_s = max(self.d.settings.heartbeat_interval_s, 0.5)
        while True:
            try:
                self.d.ledger.state_of(self.job_id)  # retries for `redis_retry_s` itself
            except REDIS_DOWN:
                self.d.clock.sleep(pause_s)
                continue
            except JobNotFound:
                pass  # Redis lost it: the lease's renewal writes it again
            try:
                self.d.fence()
            except LeaseUnconfirmed:
                continue
            except LeaseLost:
                return False
            break
        waited_s = self.d.clock.monotonic() - started
        self.log(f"Redis answers again after {waited_s:.0f}s; carrying on")
        if before is not None and before.phase is not Phase.AWAITING_REDIS:
            self._phase(before.phase)
        return True

    def _guard(self, rec: JobRecord) -> None:
        """Before each step: the lease, a cancel, the wall cap."""
        self.d.fence()
        if rec.state is S.RELEASING:
            return
        # A RETAINED VM holds the only copy of the results (invariant 4): a cancel waits for
        # their recovery, then wins the release (`_release`). Only the wall cap ends it sooner.
        if rec.state is not S.RETAINED and (reason := self._cancelled()):
            raise Finish(S.CANCELLED, f"cancelled: {reason}")
        if self.d.clock.time() >= self.deadline_at:
            raise Finish(S.TIMED_OUT, f"wall cap {self.spec.wall_cap_s:.0f}s reached")

    def _finish(self, state: S, reason: str, cause: str = "") -> None:
        """End in `state`: through RELEASING when a session may be held (or the direct edge
        does not exist), else at once. QUEUED: the session released, the job given back for
        `cause` (`finish._release`)."""
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
            cause_field = {"pending_cause": cause} if state is S.QUEUED and cause else {}
            self._to(
                S.RELEASING, f"releasing {self.name}: {reason}",
                pending_outcome=state.value, pending_reason=reason, **cause_field,
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
        """Stop acting (another owner holds the job): the watchdog decides for the session (a
        stale owner is not busy), and the job's current owner, or the janitor once its lease
        has expired, finishes the job."""
        self._phase(Phase.HANDED_OVER)
        self._ship.close(timeout_s=1.0)
        print(f"colabq runner {self.job_id}: handed over: {reason}", file=sys.stderr, flush=True)
        return Outcome(S.RUNNING, f"handed over: {reason}", self.exit_code, handed_over=True)

    def _follow(self, rec: JobRecord) -> None:
        d = self.d
        assert self.name is not None
        remaining = max(self.deadline_at - d.clock.time(), 1.0)
        follower = Follower(
            job_id=self.job_id, session=self.name, files=self.files, ledger=d.ledger,
            driver=d.driver, clock=d.clock, spawn=d.spawn, env=self._child_env(),
            attach=AttachSpec(
                self.job_id, self.name, self.nonce, self.segment, d.settings.colab_bin,
                str(d.driver.config_path), remaining + 120.0, self.spec.epochs,
            ),
            deadline_at=self.deadline_at, poll_s=d.settings.poll_interval_s,
            backoff_max_s=d.settings.reattach_backoff_max_s, fence=d.fence, log=self.log,
            cancelled=self._cancelled, stale_cells=self.adopted or self._outage_seen,
            stall_s=d.settings.attach_stall_s,
            heartbeat_path=vmplan.remote_heartbeat(self.job_id),
            on_watch=ProgressGuard(d.ledger, self.job_id, self.segment, self.log, d.on_progress),
        )  # fmt: skip
        result = follower.run()
        self._phase(Phase.FINISHING)
        if result.ended is Ended.CANCELLED:
            raise Finish(S.CANCELLED, result.reason)
        if result.ended is Ended.WALL_CAP:
            raise Finish(S.TIMED_OUT, self._wall_reason())
        if result.ended is Ended.SESSION_GONE:
            self._session_gone(result.reason)
            return
        self._job_ended()

    def _outcome(self, rec: JobRecord) -> Outcome:
        report = json.loads(rec.get("report") or "{}")
        return Outcome(rec.state, rec.reason, to_int(rec.get("exit_code")), report)


def run_job(spec: JobSpec, owner: str, deps: RunnerDeps, claimed: Claimed | None = None) -> Outcome:
    return Runner(spec, owner, deps).run(claimed)


def resume_job(spec: JobSpec, owner: str, deps: RunnerDeps) -> Outcome:
    return Runner(spec, owner, deps).resume()
