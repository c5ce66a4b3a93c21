"""The session runner: one job through one Colab session, from checks to a verified release.

allocate -> upload -> background exec client -> wait -> persist/verify -> release (verified) ->
terminal state. Every side effect comes in through `RunnerDeps`; every state change goes through
the ledger's `transition()` with this runner's ownership token. The VM-side half is the wrapper in
`worker/vm/`; the pre-allocation checks are in `checks.py`; the verified stop in `release.py`.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from worker import checks
from worker.clock import Clock
from worker.colab import ColabDriver
from worker.errors import (
    AcceleratorRejected,
    AllocationRefused,
    BudgetExceeded,
    ColabError,
    ColabqError,
)
from worker.execclient import ExecResult
from worker.ledger import Ledger
from worker.release import ReleaseOutcome, release_session
from worker.settings import Settings
from worker.spec import JobSpec
from worker.states import JobState as S
from worker.store import ArtifactStore

VM_DIR = Path(__file__).parent / "vm"
REMOTE_WRAPPER = "/content/colab-job.sh"
REMOTE_SYNC = "/content/colabq_sync.py"
REMOTE_SCRIPT = "/content/colab-user-job.sh"


class ExecProcess:
    """The handle the runner keeps on the background exec client (a Popen in production)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.proc.kill()
            self.proc.wait(timeout=10)


Spawner = Callable[[list[str], Path, Mapping[str, str]], ExecProcess]


def spawn_detached(argv: list[str], log_path: Path, env: Mapping[str, str]) -> ExecProcess:
    """Start the exec client in its own session so it outlives this worker process."""
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=dict(env),
            start_new_session=True,
        )
    return ExecProcess(proc)


@dataclass(frozen=True)
class RunnerDeps:
    clock: Clock
    ledger: Ledger
    driver: ColabDriver
    store: ArtifactStore
    settings: Settings
    workdir: Path
    spawn: Spawner = spawn_detached
    worker_name: str = "worker"


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
        self.job_id = spec.job_id
        self.name: str | None = None
        self.endpoint: str | None = None
        self.exit_code: int | None = None
        self.released: ReleaseOutcome | None = None
        self.notes: list[str] = []
        self.nonce = secrets.token_hex(8)

    # --- helpers ----------------------------------------------------------------------------

    def _to(self, state: S, reason: str, **fields: str) -> None:
        self.d.ledger.transition(self.job_id, state, owner=self.owner, reason=reason, fields=fields)

    def log(self, text: str) -> None:
        self.d.ledger.append_log(self.job_id, f"[colabq] {text}", "colabq")

    def _cancelled(self) -> str | None:
        return self.d.ledger.cancel_requested(self.job_id)

    # --- the run ----------------------------------------------------------------------------

    def run(self) -> Outcome:
        self._to(S.ALLOCATING, f"claimed by {self.d.worker_name}", worker=self.d.worker_name)
        try:
            self._check_before_allocation()
            self._allocate()
            self._start()
            self._wait()
            state, reason = self._persist()
        except _Finish as f:
            state, reason = f.state, f.reason
        except ColabqError as exc:
            state, reason = S.FAILED, exc.advice()
        return self._finish(state, reason)

    def _check_before_allocation(self) -> None:
        # Invariant 1: nothing is allocated before these pass.
        d, spec = self.d, self.spec
        try:
            checks.check_job_files(spec, d.workdir, VM_DIR, self._driver_source())
            checks.check_cli_version(d.driver, d.settings.colab_version)
            balance = checks.check_budget(d.driver, spec.budget_units)
        except BudgetExceeded as exc:
            raise _Finish(S.FAILED_BUDGET, exc.advice()) from None
        except ColabqError as exc:
            raise _Finish(S.FAILED, f"pre-allocation check failed: {exc.advice()}") from None
        self.log(f"checks passed (colab {d.settings.colab_version}, balance {balance:.2f} units)")
        if reason := self._cancelled():
            raise _Finish(S.CANCELLED, f"cancelled before allocation: {reason}")

    def _allocate(self) -> None:
        d, spec = self.d, self.spec
        self.name = session_name(d.settings.session_prefix)
        d.ledger.set_fields(self.job_id, owner=self.owner, session=self.name)
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
        """Record the assigned endpoint durably the moment the CLI's own state shows it."""
        assert self.name is not None
        rec = self.d.driver.local_record(self.name)
        if rec is None or not rec.endpoint:
            return False
        self.endpoint = rec.endpoint
        self.d.ledger.set_fields(self.job_id, owner=self.owner, endpoint=rec.endpoint)
        return True

    def _start(self) -> None:
        d, name = self.d, self.name
        assert name is not None
        self._to(S.STARTING, f"session {name} at {self.endpoint}")
        d.driver.upload(name, VM_DIR / "colab-job.sh", REMOTE_WRAPPER)
        d.driver.upload(name, VM_DIR / "colabq_sync.py", REMOTE_SYNC)
        d.driver.upload(name, d.workdir / "colab-user-job.sh", REMOTE_SCRIPT)
        self.log("uploaded the wrapper and the job script")

    def _driver_source(self) -> str:
        spec = self.spec
        wrapper_args = [
            "--job", spec.job_id, "--nonce", self.nonce, "--ttl", str(int(spec.ttl_s)),
            "--sync-interval", str(int(spec.sync_interval_s)),
            "--dest-kind", spec.artifact.kind, "--dest-repo", spec.artifact.repo,
            "--dest-type", spec.artifact.repo_type, "--prefix", spec.artifact.prefix,
        ]  # fmt: skip
        for p in spec.sync_paths:
            wrapper_args += ["--sync", p]
        argv = ["bash", "colab-job.sh", *wrapper_args, "--", "bash", "{content}/colab-user-job.sh"]
        argv += list(spec.hub_inputs.values())
        template = (VM_DIR / "driver.py.tmpl").read_text()
        return template.replace("__ARGV__", json.dumps(argv)).replace("__NONCE__", self.nonce)

    def _wait(self) -> None:
        d, spec, name = self.d, self.spec, self.name
        assert name is not None
        driver_py = d.workdir / "driver.py"
        result_path = d.workdir / "exec-result.json"
        result_path.unlink(missing_ok=True)
        argv = [
            sys.executable, "-m", "worker.execclient", "--job", self.job_id,
            "--nonce", self.nonce, "--result", str(result_path), "--",
            *d.driver.exec_argv(name, driver_py, spec.wall_cap_s),
        ]  # fmt: skip
        env = {
            **d.driver.exec_env(),
            "COLABQ_REDIS_URL": d.settings.redis_url,
            "COLABQ_KEY_PREFIX": d.settings.key_prefix,
        }
        client = d.spawn(argv, d.workdir / "execclient.log", env)
        self._to(S.RUNNING, f"exec client pid {client.pid} started")
        deadline = d.clock.monotonic() + spec.wall_cap_s
        while client.alive():
            if reason := self._cancelled():
                client.kill()
                raise _Finish(S.CANCELLED, f"cancelled while running: {reason}")
            if d.clock.monotonic() >= deadline:
                client.kill()
                raise _Finish(S.TIMED_OUT, f"wall cap {spec.wall_cap_s:.0f}s reached")
            d.clock.sleep(d.settings.poll_interval_s)
        res = ExecResult.load(result_path) or ExecResult(error="the exec client left no result")
        self.exit_code = res.exit_code
        if res.sentinels.get("FIRST_UPLOAD") == "failed":
            raise _Finish(S.FAILED, "the first upload failed on the VM; the job did not run")
        if self.exit_code is None:
            why = res.error or f"colab exec exited {res.exec_rc} without the job's exit status"
            raise _Finish(S.FAILED, why)
        if res.sentinels.get("FINAL_UPLOAD") == "failed":
            self.notes.append("the final upload failed on the VM")
        self.log(f"job exited {self.exit_code}")

    def _persist(self) -> tuple[S, str]:
        self._to(S.PERSISTING, f"job exited {self.exit_code}; verifying artifacts")
        v = self.d.store.verify(self.spec)
        self.log(v.summary())
        if not v.ok:
            return S.FAILED, f"job exited {self.exit_code} but artifacts are {v.summary()}"
        if self.exit_code != 0:
            return S.FAILED, f"job exited {self.exit_code}"
        return S.SUCCEEDED, "exit 0, artifacts verified, session released"

    def _finish(self, state: S, reason: str) -> Outcome:
        d = self.d
        if self.name is not None and self.endpoint is not None:
            rec = d.ledger.get(self.job_id)
            if rec.state is not S.RELEASING:
                self._to(S.RELEASING, f"releasing {self.name}: {reason}")
            try:
                self.released = release_session(
                    d.driver, self.name, self.endpoint, clock=d.clock, log=self.log
                )
            except ColabqError as exc:
                self.released = None
                reason = f"{reason}; RELEASE NOT VERIFIED: {exc.advice()}"
                state = S.FAILED_LOST if state is S.SUCCEEDED else state
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
        next_action = "none"
        if remaining:
            next_action = f"stop {self.name} at {remaining} (`colabq cancel {spec.job_id}`)"
        elif state is not S.SUCCEEDED:
            next_action = f"read `colabq logs {spec.job_id}`, fix, and resubmit"
        return {
            "job_id": spec.job_id,
            "run_name": spec.run_name,
            "commit": spec.commit,
            "outcome": state.value,
            "reason": reason,
            "exit_code": self.exit_code,
            "artifacts": self.d.store.location(spec),
            "session": self.name,
            "endpoint": self.endpoint,
            "runtime": released or ("never allocated" if self.endpoint is None else "UNKNOWN"),
            "remaining_endpoint": remaining,
            "notes": self.notes,
            "next_action": next_action,
        }


def run_job(spec: JobSpec, owner: str, deps: RunnerDeps) -> Outcome:
    return Runner(spec, owner, deps).run()
