"""The steps from the job's end: the end classified from its sentinels (or, if the VM went
away first, from the store), PERSISTING (the session stopped at once while the store verifies),
RETAINED (the only copy recovered first), RELEASING (the job's exec clients killed, the verified
stop, the pending outcome recorded with its report; a cancel wins) and RESTARTING (a new segment
after a lost VM)."""

from __future__ import annotations

import json
import os
import threading

from worker import exitwhy, gpuidle, timelimit
from worker.colab import rates, versions
from worker.colab.release import ReleaseOutcome, release_session
from worker.errors import ColabqError
from worker.fleet.causes import Cause, PutBack
from worker.progress import record, words
from worker.records.record import JobRecord
from worker.records.tail import forward_stored_tail
from worker.records.unheld import note_reason
from worker.session import codereport, procs
from worker.session import plan as vmplan
from worker.session.job import FRESH, Finish, JobRun, to_int
from worker.session.recovery import recover_results
from worker.session.watchpolicy import Phase
from worker.states import JobState as S


class Finishing(JobRun):
    def _job_ended(self) -> None:
        """The wrapper's end was forwarded: classify it from its sentinels."""
        w = self.d.ledger.read_watch(self.job_id)
        self.exit_code = to_int(w.get("exec_exit"))
        if w.get("exec_not_launched"):
            raise Finish(S.FAILED, "the job was never started on the VM")
        if w.get("exec_first_upload") == "failed":
            raise Finish(S.FAILED, "the first upload failed on the VM; the job did not run")
        if w.get("exec_resume") == "failed":
            raise Finish(S.FAILED, "the resume checkpoint could not be downloaded on the VM")
        if why := codereport.not_ready(w):
            raise Finish(S.FAILED, why)
        if self.exit_code is None:
            raise Finish(S.FAILED, "the wrapper on the VM ended without the job's exit status")
        self.log(f"job exited {self.exit_code}")
        if w.get("exec_final_upload") != "ok":
            self._to(S.RETAINED, "final upload failed on the VM; recovering the results")
            return
        # The results are in the store: stop paying for the VM while the store verifies them
        # (once: a Redis outage may have interrupted this step after the release began).
        if self._early_release is None:
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
            self._take_stored_tail()
            self._to(S.PERSISTING, f"job exited {self.exit_code}; verifying artifacts")
            return
        synced = v.summary() if v is not None else "the store could not be read"
        reason = f"the VM was lost ({how}) before the job ended; last synced: {synced}"
        if self.restarts < self.spec.max_restarts:
            raise Finish(S.RESTARTING, reason)
        raise Finish(S.VM_LOST, reason)

    def _take_stored_tail(self) -> None:
        """The job ended and its VM is gone: whatever of its console no attach client forwarded
        comes from the copy its final upload stored, before the job is reported ended."""
        spec, segment = self.spec, self.segment
        try:
            tail = forward_stored_tail(
                self.d.ledger, self.job_id, segment, self.nonce,
                lambda offset: self.d.store.console_tail(spec, segment, offset),
            )  # fmt: skip
        except ColabqError as exc:
            self.log(f"the console log of the job's final upload could not be read: {exc.advice()}")
            return
        if said := tail.summary():
            self.log(said)

    def _persist(self, rec: JobRecord) -> None:
        if self.exit_code is None:
            self.exit_code = to_int(self.d.ledger.read_watch(self.job_id).get("exec_exit"))
        try:
            v = self.d.store.verify(self.spec)
        except ColabqError as exc:
            raise Finish(
                S.FAILED, f"job exited {self.exit_code} but artifacts could not be verified: {exc}"
            ) from None
        self.log(v.summary())
        if self.exit_code is None:
            self.exit_code = v.exit_code
        if idle := gpuidle.idle_reason(self.d.ledger.read_watch(self.job_id)):
            raise Finish(S.FAILED, idle if v.ok else f"{idle}; artifacts are {v.summary()}")
        if timelimit.hit_time_limit(self.d.ledger.read_watch(self.job_id)):
            why = timelimit.timed_out_reason(self.spec, self.exit_code)
            raise Finish(S.TIMED_OUT, why if v.ok else f"{why}; artifacts are {v.summary()}")
        if not v.ok:
            raise Finish(S.FAILED, f"job exited {self.exit_code} but artifacts are {v.summary()}")
        if self.exit_code != 0:
            w = self.d.ledger.read_watch(self.job_id)
            raise Finish(S.FAILED, exitwhy.exit_reason(self.exit_code, w))
        raise Finish(S.SUCCEEDED, "exit 0, artifacts verified, session released")

    def _recover(self, rec: JobRecord) -> None:
        """The VM kept itself because the final upload failed: copy its results here, then
        let it be released (invariant 4). A recovery that fails keeps the VM (it holds the only
        copy) and is tried again, with backoff, the job's reason saying so, until it succeeds,
        the VM goes away or the wall cap (a cancel waits for the recovery)."""
        assert self.name is not None
        w = self.d.ledger.read_watch(self.job_id)
        if self.exit_code is None:
            self.exit_code = to_int(w.get("exec_exit"))
        if w.get("results_local"):  # a watchdog recovered them before it stopped the VM
            self.results_local = w["results_local"]
            raise Finish(self._failed_or_timed_out(w), self._recovered_reason(w))
        self._phase(Phase.RECOVERING)
        self.d.fence()
        got = recover_results(
            self.d.driver, self.name, vmplan.remote_job_dir(self.job_id), self.files.results,
            log=self.log, lock_path=self.files.recover_lock,
        )  # fmt: skip
        self.log(got.summary())
        if not got.ok:
            self._recovery_failed(got.summary(), w)
            return
        self._phase(Phase.FINISHING)
        self.results_local = f"{os.uname().nodename}:{got.local_dir}"
        self.d.ledger.set_fields(self.job_id, owner=self.owner, results_local=self.results_local)
        raise Finish(self._failed_or_timed_out(w), self._recovered_reason(w))

    def _failed_or_timed_out(self, w: dict[str, str]) -> S:
        """A job that `timeout` stopped at its own time limit timed out; any other did not end
        well."""
        return S.TIMED_OUT if timelimit.hit_time_limit(w) else S.FAILED

    def _recovered_reason(self, w: dict[str, str]) -> str:
        idle = gpuidle.idle_reason(w)
        return (
            (f"{idle}; " if idle else "")
            + f"job exited {self.exit_code} but the final upload failed; results recovered to "
            f"{self.results_local}"
        )

    def _recovery_failed(self, summary: str, w: dict[str, str]) -> None:
        """Keep the VM and say why on the job; wait before the next attempt (1, 2, 4 ... s, at
        most `reattach_backoff_max_s`). A VM that went away took the only copy with it."""
        if w.get("gone_verified_at"):
            raise Finish(S.FAILED_LOST, f"final upload failed and the VM is gone: {summary}")
        self._recover_attempts += 1
        n = self._recover_attempts
        why = (
            f"final upload failed; recovering the results failed {n} time(s) ({summary}); the "
            "VM is kept: it holds the only copy"
        )
        note_reason(self.d.ledger, self.job_id, self.owner, S.RETAINED, why)
        self.log(why)
        self.d.clock.sleep(min(2.0 ** (n - 1), self.d.settings.reattach_backoff_max_s))

    def _release_now(self) -> None:
        """Kill the job's exec clients (a real `colab exec` outliving its session writes its
        record back), then the verified stop."""
        assert self.name is not None and self.endpoint is not None
        procs.kill_job_processes(self.files.root)
        try:
            s = self.d.settings
            self.released = release_session(
                self.d.driver, self.name, self.endpoint, clock=self.d.clock, log=self.log,
                attempts=s.release_attempts, backoff_s=s.release_backoff_s,
            )  # fmt: skip
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
        if state is S.QUEUED:
            # Given back once its session is verified gone (never while one may be held): a
            # VM with the wrong GPU waits for its GPU; a host failure goes to another worker.
            cause = Cause(rec.get("pending_cause") or Cause.CAPACITY.value)
            if self._early_error is None:
                procs.kill_job_processes(self.files.root, everything=True)
                raise PutBack(cause, reason, released=True)
            state = S.FAILED_NO_GPU if cause is Cause.CAPACITY else S.FAILED
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

    def _restart(self, rec: JobRecord) -> None:
        """A new segment: a new session, resumed from the last synced checkpoint (or, `FRESH`,
        a new session for a job that never ran on its first: no restart counted)."""
        fresh = rec.reason.startswith(FRESH)
        self.restarts = int(rec.get("restarts") or 0) + (0 if fresh else 1)
        self.segment = int(rec.get("segment") or 0) + 1
        self.name, self.endpoint, self.exit_code, self.released = None, None, None, None
        self._early_error = None
        self.resume_uri = self.d.store.checkpoint_uri(self.spec)
        where = self.resume_uri or self.spec.resume_from or "the start (nothing synced yet)"
        self.d.ledger.start_segment(self.job_id, self.owner, self.segment)
        what = (
            "a fresh session" if fresh else f"restart {self.restarts} of {self.spec.max_restarts}"
        )
        self._to(
            S.ALLOCATING,
            f"{what}: resuming from {where}",
            segment=str(self.segment),
            restarts=str(self.restarts),
        )

    def _report(self, state: S, reason: str) -> dict[str, object]:
        spec = self.spec
        released = self.released.value if self.released else None
        remaining = None if (self.endpoint is None or released) else self.endpoint
        if remaining:
            next_action = (
                f"session {self.name} may still hold {remaining}: the janitor stops it as "
                f"colabq's orphan (`colabq janitor`), or stop it in `colab sessions` yourself"
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
        cli = versions.recorded_version(self.d.ledger.get(self.job_id).get("colab_cli"))
        return {
            "job_id": spec.job_id,
            "run_name": spec.run_name,
            "commit": spec.commit,
            "colab_cli": cli,
            "outcome": state.value,
            "reason": reason,
            "exit_code": self.exit_code,
            "artifacts": self.d.store.location(spec),
            "results_local": self.results_local,
            "session": self.name,
            "endpoint": self.endpoint,
            "account": self.d.settings.account,  # the Colab account the job's VMs were on
            **timelimit.limits_json(spec),
            "restarts": self.restarts,
            "runtime": released or ("never allocated" if self.endpoint is None else "UNKNOWN"),
            "remaining_endpoint": remaining,
            **self._costs(),
            **self._code(),
            "notes": [*self.notes, *versions.report_notes(cli)],
            "next_action": next_action,
        }

    def _code(self) -> dict[str, object]:
        """The repository the job ran (what was shipped, what the VM checked out) and its uv
        environment (the known breakages found there, repaired or not)."""
        w = self.d.ledger.read_watch(self.job_id)
        return {
            "code": codereport.code_report(self.spec, w),
            "environment": codereport.environment_report(self.spec, w),
            "inputs": codereport.inputs_report(self.spec, w),
            # The rate the run went at, measured from its console (`worker.progress`).
            "progress": words.report(record.from_watch(w)[0], self.spec.epochs),
        }

    def _costs(self) -> dict[str, object]:
        """The job's duration and compute units (every segment's held time; the current one's
        release is verified by now)."""
        rec = self.d.ledger.get(self.job_id)
        gpu = rec.get("gpu") or self.spec.gpu.value  # the type it runs on (a fallback, maybe)
        return rates.costs(gpu, rec.created_at, rec.fields, self.d.clock.time())
