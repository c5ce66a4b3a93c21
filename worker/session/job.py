"""One job run by one owner: what every step of the runner shares.

The side effects (`RunnerDeps`), the outcome, the `Finish` signal a step raises to end the job,
and `JobRun`, the state one owner keeps while it drives the job (its session, the endpoint, the
segment) with the helpers every step uses: recording a state change, the owner's phase, colabq's
log lines, the cancel flag, the endpoint, the watch spec and the segment's plan. The steps are
in `start.py` (allocating, starting) and `finish.py` (the job's end, persisting, recovering,
releasing, restarting); `runner.py` is the loop over them.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis

from worker.clock import Clock
from worker.colab.driver import ColabDriver
from worker.colab.release import ReleaseOutcome
from worker.errors import ColabError, ColabqError
from worker.records.ledger import Ledger
from worker.records.logship import LogShipper
from worker.session import plan as vmplan
from worker.session.follow import Spawner
from worker.session.jobfiles import JobFiles, ProcRef, WatchSpec
from worker.session.watchpolicy import Phase
from worker.settings import Settings
from worker.spec import KILL_AFTER_S, JobSpec, reserve_s
from worker.states import JobState as S
from worker.store.artifacts import ArtifactStore

WatchdogStarter = Callable[[JobFiles, Mapping[str, str]], object]
InputChecker = Callable[[str], int]  # an hf:// URI -> its bytes; raises if missing or empty
Fence = Callable[[], None]
LAUNCH_TIMEOUT_S = 120.0
# A RESTARTING reason that starts with this: a fresh session for a job that never ran on the
# one it had (not a restart of the job: not counted against --max-restarts).
FRESH = "fresh session:"
# Redis errors that outlasted the client's retries: the owner can record nothing any more.
REDIS_DOWN = (redis.ConnectionError, redis.TimeoutError)


def spawn_detached(argv: list[str], log_path: Any, env: Mapping[str, str]) -> ProcRef:
    """Start an attach client in a process session of its own: it outlives this worker, and
    one `killpg` ends it with its `colab exec`."""
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
    # Told of the run's progress while it runs, every few seconds at most (Flower's job page).
    on_progress: Callable[[str], None] = lambda text: None
    # The lease's fence; the default trusts the per-job lock alone (tests without a lease).
    fence: Fence = lambda: None
    # The GPU types this worker serves: those of a job's types it may allocate.
    served_gpus: tuple[str, ...] = ("T4", "L4", "G4", "A100", "H100")


@dataclass(frozen=True)
class Claimed:
    """A claim made with the job's first state change (`records.claim`): the runner starts
    from ALLOCATING with the nonce and wall deadline the claim recorded."""

    nonce: str
    deadline_at: float


@dataclass(frozen=True)
class Outcome:
    state: S
    reason: str
    exit_code: int | None = None
    report: Mapping[str, object] = field(default_factory=dict)
    handed_over: bool = False
    # The cause ("host", "capacity") for which this owner gave the job back to the queue.
    put_back: str | None = None


class Finish(Exception):
    """Internal: end the run in `state` (after releasing whatever session is held)."""

    def __init__(self, state: S, reason: str, cause: str = "") -> None:
        super().__init__(reason)
        # For QUEUED (the session released, then the job given back): "host" or "capacity".
        self.state, self.reason, self.cause = state, reason, cause


def session_name(prefix: str) -> str:
    """An owned name: colabq's prefix plus 128 random bits (ownership is proven by it later)."""
    return f"{prefix}{secrets.token_hex(16)}"


class JobRun:
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
        # The GPU type of this segment's session (a fallback type, maybe): the VM must have it.
        self.gpu = spec.gpu.value
        self.deadline_at = 0.0
        self.segment = 0
        self.restarts = 0
        self.resume_uri: str | None = None
        self._early_release: threading.Thread | None = None
        self._early_error: ColabqError | None = None
        self.adopted = False
        self._recover_attempts = 0  # failed recoveries of a retained VM's results, so far
        self._ship = LogShipper(deps.ledger, spec.job_id)

    def _to(self, state: S, reason: str, **fields: str) -> None:
        self.d.ledger.transition(self.job_id, state, owner=self.owner, reason=reason, fields=fields)
        self._told(state, reason)

    def _told(self, state: S, reason: str) -> None:
        """Tell the listener (Flower) of a state change recorded."""
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
        login = self.d.settings.sentinel_login()
        return {
            **self.d.driver.exec_env(),
            "COLABQ_REDIS_URL": self.d.settings.redis_url,
            "COLABQ_REDIS_MASTER_NAME": self.d.settings.redis_master_name or "",
            # (their environment, never their argv: a command line is anyone's to read)
            "COLABQ_REDIS_SENTINEL_USERNAME": login.username or "",
            "COLABQ_REDIS_SENTINEL_PASSWORD": login.password or "",
            "COLABQ_KEY_PREFIX": self.d.settings.key_prefix,
            "COLABQ_REDIS_RETRY_S": repr(self.d.settings.redis_retry_s),
            # All the observers read of the settings (`forward.FeedSettings`): the owner's.
            "COLABQ_LOG_STREAM_MAXLEN": str(self.d.settings.log_stream_maxlen),
            "COLABQ_RETENTION_S": repr(self.d.settings.retention_s),
        }

    def _holds_session(self) -> bool:
        return self.name is not None and self.endpoint is not None

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

    def _segment_plan(self) -> vmplan.Segment:
        if self.segment == 0:
            return vmplan.Segment()
        left = self.deadline_at - self.d.clock.time()
        ttl = left - reserve_s(self.spec.wall_cap_s) - KILL_AFTER_S
        return vmplan.Segment(self.segment, min(self.spec.ttl_s, max(ttl, 1.0)), self.resume_uri)

    def _verify_quietly(self) -> Any:
        try:
            return self.d.store.verify(self.spec)
        except ColabqError:
            return None

    def _wall_reason(self) -> str:
        v = self._verify_quietly()
        synced = v.summary() if v is not None else "the store could not be read"
        return f"wall cap {self.spec.wall_cap_s:.0f}s reached; last synced: {synced}"


def to_int(value: str | None) -> int | None:
    if value is None or not value.lstrip("-").isdigit():
        return None
    return int(value)


def sentinel(output: str, nonce: str, what: str) -> str | None:
    prefix = f"__COLABQ_{nonce}_{what}__="
    for line in output.splitlines():
        if line.startswith(prefix):
            return line[len(prefix) :].strip()
    return None
