"""The session runner: one job through one Colab session, from checks to a verified release.

checks -> watchdog confirmed alive -> allocate (endpoint recorded at once) -> uploads -> a
background exec client -> wait (cancel, wall cap) -> persist and verify, or recover the results
of a retained VM -> verified release -> terminal state and final report. Every side effect comes
in through `RunnerDeps`; every state change goes through the ledger's `transition()` with this
runner's ownership token. The VM-side half is `worker/vm/`; the stop rules are the watchdog's
(`watchpolicy.py`), which runs beside this runner and outlives it.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from worker.clock import Clock
from worker.colab.driver import ColabDriver
from worker.colab.release import ReleaseOutcome, release_session
from worker.errors import (
    AcceleratorRejected,
    AllocationRefused,
    BudgetExceeded,
    ColabError,
    ColabqError,
)
from worker.records.ledger import Ledger
from worker.session import checks
from worker.session import plan as vmplan
from worker.session.attach import ExecResult, Spawner, spawn_detached
from worker.session.jobfiles import JobFiles, ProcRef, WatchSpec
from worker.session.recovery import recover_results
from worker.session.watchpolicy import Phase
from worker.settings import Settings
from worker.spec import JobSpec
from worker.states import JobState as S
from worker.store.artifacts import ArtifactStore

WatchdogStarter = Callable[[JobFiles, Mapping[str, str]], object]


InputChecker = Callable[[str], int]  # an hf:// URI -> its bytes; raises if missing or empty


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


@dataclass(frozen=True)
class Outcome:
    state: S
    reason: str
    exit_code: int | None = None
    report: Mapping[str, object] = field(default_factory=dict)


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
        self.verification: str | None = None
        self.notes: list[str] = []
        self.nonce = secrets.token_hex(8)
        self.deadline_at = 0.0

    # --- helpers ----------------------------------------------------------------------------

    def _to(self, state: S, reason: str, **fields: str) -> None:
        self.d.ledger.transition(self.job_id, state, owner=self.owner, reason=reason, fields=fields)
        try:
            self.d.on_state(state, reason)
        except Exception as exc:  # monitoring must never fail a job
            self.log(f"could not publish the state change: {exc}")

    def _phase(self, phase: Phase, client: ProcRef | None = None) -> None:
        self.files.write_runner(phase, client=client)

    def log(self, text: str) -> None:
        self.d.ledger.append_log(self.job_id, f"[colabq] {text}", "colabq")

    def _cancelled(self) -> str | None:
        return self.d.ledger.cancel_requested(self.job_id)

    def _child_env(self) -> dict[str, str]:
        return {
            **self.d.driver.exec_env(),
            "COLABQ_REDIS_URL": self.d.settings.redis_url,
            "COLABQ_KEY_PREFIX": self.d.settings.key_prefix,
        }

    # --- the run ----------------------------------------------------------------------------

    def run(self) -> Outcome:
        # The wall cap counts from before allocation, whatever the later steps take.
        self.deadline_at = self.d.clock.time() + self.spec.wall_cap_s
        self.files.ensure()
        self._phase(Phase.CHECKING)
        self._to(S.ALLOCATING, f"claimed by {self.d.worker_name}", worker=self.d.worker_name)
        try:
            self._check_before_allocation()
            self._allocate()
            self._start()
            self._wait()
            state, reason = self._settle()
        except _Finish as f:
            state, reason = f.state, f.reason
        except ColabqError as exc:
            state, reason = S.FAILED, exc.advice()
        return self._finish(state, reason)

    def _check_before_allocation(self) -> None:
        # Invariant 1: nothing is allocated before these pass, the watchdog included.
        d, spec = self.d, self.spec
        try:
            checks.check_job_files(spec, self.files.root, vmplan.VM_DIR, self._driver_source())
            if d.settings.hf_token_file is not None:
                checks.check_token_file(d.settings.hf_token_file)
            elif spec.artifact.kind == "hf":
                raise _Finish(
                    S.FAILED, "a Hub destination needs COLABQ_HF_TOKEN_FILE on the worker host"
                )
            dest = d.store.check_destination(spec.artifact)
            self.log(f"destination: {dest}")
            if spec.resume_from:
                size = d.check_input(spec.resume_from)
                self.log(f"resume checkpoint {spec.resume_from}: {size} bytes")
            checks.check_cli_version(d.driver, d.settings.colab_version)
            balance = checks.check_budget(d.driver, spec.budget_units)
        except BudgetExceeded as exc:
            raise _Finish(S.FAILED_BUDGET, exc.advice()) from None
        except ColabqError as exc:
            raise _Finish(S.FAILED, f"pre-allocation check failed: {exc.advice()}") from None
        if reason := self._cancelled():
            raise _Finish(S.CANCELLED, f"cancelled before allocation: {reason}")
        self.name = session_name(d.settings.session_prefix)
        self.files.write_watch(
            WatchSpec(
                job_id=self.job_id,
                session=self.name,
                colab_bin=d.settings.colab_bin,
                config_path=str(d.driver.config_path),
                wall_deadline_at=self.deadline_at,
                idle_timeout_s=spec.idle_timeout_s,
                poll_s=d.settings.watchdog_poll_s,
                remote_job_dir=vmplan.remote_job_dir(self.job_id),
            )
        )
        try:
            d.start_watchdog(self.files, self._child_env())
        except ColabqError as exc:
            raise _Finish(S.FAILED, f"pre-allocation check failed: {exc.advice()}") from None
        self.log(f"checks passed (colab {d.settings.colab_version}, balance {balance:.2f} units)")
        self.log("watchdog alive")

    def _allocate(self) -> None:
        d, spec = self.d, self.spec
        assert self.name is not None
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

    def _record_endpoint(self) -> bool:
        """Record the assigned endpoint durably the moment the CLI's own state shows it (the
        watchdog does the same while `colab new` runs)."""
        assert self.name is not None
        endpoint = self.files.endpoint()
        if endpoint is None:
            try:
                rec = self.d.driver.local_record(self.name)
            except ColabError:
                rec = None
            if rec is None or not rec.endpoint:
                return False
            endpoint = rec.endpoint
            self.files.record_endpoint(endpoint)
        self.endpoint = endpoint
        self.d.ledger.set_fields(self.job_id, owner=self.owner, endpoint=endpoint)
        return True

    def _start(self) -> None:
        d, name = self.d, self.name
        assert name is not None
        self._to(S.STARTING, f"session {name} at {self.endpoint}")
        self._phase(Phase.UPLOADING)
        script = self.files.root / "colab-user-job.sh"
        for local, remote in vmplan.uploads(script, d.settings.hf_token_file):
            d.driver.upload(name, local, remote)
        self.log("uploaded the wrapper and the job script")

    def _driver_source(self) -> str:
        return vmplan.driver_source(self.spec, self.d.settings, self.nonce)

    def _wait(self) -> None:
        d, spec, name = self.d, self.spec, self.name
        assert name is not None
        self.files.exec_result.unlink(missing_ok=True)
        argv = [
            sys.executable, "-m", "worker.session.attach", "--job", self.job_id,
            "--nonce", self.nonce, "--result", str(self.files.exec_result), "--",
            *d.driver.exec_argv(name, self.files.root / "driver.py", spec.wall_cap_s),
        ]  # fmt: skip
        client = d.spawn(argv, self.files.root / "execclient.log", self._child_env())
        self._phase(Phase.RUNNING, client=client.ref)
        self._to(S.RUNNING, f"exec client pid {client.pid} started")
        while client.alive():
            if reason := self._cancelled():
                client.kill()
                raise _Finish(S.CANCELLED, f"cancelled while running: {reason}")
            if d.clock.time() >= self.deadline_at:
                client.kill()
                raise _Finish(S.TIMED_OUT, f"wall cap {spec.wall_cap_s:.0f}s reached")
            client.wait(d.settings.poll_interval_s)
        self._phase(Phase.FINISHING)
        res = ExecResult.load(self.files.exec_result) or ExecResult(
            error="the exec client left no result"
        )
        self.exit_code = res.exit_code
        if res.sentinels.get("FIRST_UPLOAD") == "failed":
            raise _Finish(S.FAILED, "the first upload failed on the VM; the job did not run")
        if res.sentinels.get("RESUME") == "failed":
            raise _Finish(S.FAILED, "the resume checkpoint could not be downloaded on the VM")
        if self.exit_code is None:
            why = res.error or f"colab exec exited {res.exec_rc} without the job's exit status"
            raise _Finish(S.FAILED, why)
        self.log(f"job exited {self.exit_code}")
        if res.sentinels.get("FINAL_UPLOAD") == "failed":
            self._recover()

    def _recover(self) -> None:
        """The VM kept itself because the final upload failed: copy its results here, then
        let it be released (invariant 4)."""
        assert self.name is not None
        self._phase(Phase.RECOVERING)
        self._to(S.RETAINED, "final upload failed on the VM; recovering the results")
        rec = recover_results(
            self.d.driver, self.name, vmplan.remote_job_dir(self.job_id), self.files.results,
            log=self.log, lock_path=self.files.recover_lock,
        )  # fmt: skip
        self.log(rec.summary())
        self._phase(Phase.FINISHING)
        if not rec.ok:
            raise _Finish(
                S.FAILED_LOST, f"final upload failed and recovery failed: {rec.summary()}"
            )
        self.results_local = f"{os.uname().nodename}:{rec.local_dir}"
        self.d.ledger.set_fields(self.job_id, owner=self.owner, results_local=self.results_local)
        raise _Finish(
            S.FAILED,
            f"job exited {self.exit_code} but the final upload failed; results recovered to "
            f"{self.results_local}",
        )

    def _settle(self) -> tuple[S, str]:
        self._to(S.PERSISTING, f"job exited {self.exit_code}; verifying artifacts")
        try:
            v = self.d.store.verify(self.spec)
        except ColabqError as exc:
            return (
                S.FAILED,
                f"job exited {self.exit_code} but artifacts could not be verified: {exc}",
            )
        self.log(v.summary())
        if not v.ok:
            return S.FAILED, f"job exited {self.exit_code} but artifacts are {v.summary()}"
        if self.exit_code != 0:
            return S.FAILED, f"job exited {self.exit_code}"
        return S.SUCCEEDED, "exit 0, artifacts verified, session released"

    def _finish(self, state: S, reason: str) -> Outcome:
        d = self.d
        if self.name is not None and self.endpoint is None:
            self._record_endpoint()
        if self.name is not None and self.endpoint is not None:
            if d.ledger.get(self.job_id).state is not S.RELEASING:
                self._to(S.RELEASING, f"releasing {self.name}: {reason}")
            try:
                self.released = release_session(
                    d.driver, self.name, self.endpoint, clock=d.clock, log=self.log
                )
            except ColabqError as exc:
                self.released = None
                reason = f"{reason}; RELEASE NOT VERIFIED: {exc.advice()}"
                state = S.FAILED_LOST if state is S.SUCCEEDED else state
        self._phase(Phase.DONE)
        report = self._report(state, reason)
        fields = {"report": json.dumps(report), "outcome": state.value}
        if self.exit_code is not None:
            fields["exit_code"] = str(self.exit_code)
        self._to(state, reason, **fields)
        return Outcome(state, reason, self.exit_code, report)

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
            "verification": self.verification,
            "results_local": self.results_local,
            "session": self.name,
            "endpoint": self.endpoint,
            "runtime": released or ("never allocated" if self.endpoint is None else "UNKNOWN"),
            "remaining_endpoint": remaining,
            "notes": self.notes,
            "next_action": next_action,
        }


def run_job(spec: JobSpec, owner: str, deps: RunnerDeps) -> Outcome:
    return Runner(spec, owner, deps).run()
