"""Owning a job on this host: the wiring of a runner, its lease, and adoption.

`own_job` builds the runner's side effects once (the Colab driver on the job's own CLI state
file, the store with this host's Hub token and endpoint, the watchdog starter), holds the lease
(a heartbeat thread whose fence every side effect passes), and runs the job from where the
ledger says it is. A claim starts it; `adopt_job` continues it after its owner died:

- a restarted worker adopts the jobs in its own state dir (`find_orphaned`): the same CLI state,
  perhaps a live attach client and watchdog, and an owner that is provably dead (its pid);
- any other host logged in as the job's Colab account (and no host of another account: its
  `colab status` cannot see the VM) adopts by writing a CLI record for the owned name at the
  recorded endpoint into its own `--config` (`write_adoption_record`) once the lease has
  expired. The janitor does this for a host that is gone.
"""

from __future__ import annotations

import json
import secrets
import socket
import time
from collections.abc import Callable
from pathlib import Path

from worker.accounts.login import check_may_act
from worker.clock import SystemClock
from worker.colab.records import write_adoption_record
from worker.deps import build_driver, build_ledger, job_dir
from worker.errors import ColabqError, LedgerError, refuse
from worker.fleet.causes import Cause
from worker.fleet.putback import Attempt, give_back_host
from worker.records import ids
from worker.records.lease import Heartbeat
from worker.records.ledger import Ledger
from worker.records.vms import check_vm
from worker.session.hubtoken import token_path
from worker.session.job import Claimed
from worker.session.jobfiles import JobFiles
from worker.session.plan import SCRIPT
from worker.session.runner import Outcome, RunnerDeps, resume_job, run_job
from worker.session.watchdog import start_watchdog
from worker.session.watchpolicy import Phase
from worker.settings import Settings
from worker.spec import JobSpec
from worker.states import TERMINAL, JobState
from worker.store.build import build_store

StateListener = Callable[[JobState, str], None]


def host_id(settings: Settings) -> str:
    """This host and state dir: what a restarted worker recognises as its own."""
    return f"{socket.gethostname()}:{settings.state_dir}"


def read_token(path: Path | None) -> str | None:
    """The Hub token, in this worker's memory only (checked again before allocation)."""
    if path is None:
        return None
    try:
        return path.read_text().strip() or None
    except OSError:
        return None  # the runner's pre-allocation check reports the file's problem


def own_job(
    spec: JobSpec,
    owner: str,
    settings: Settings,
    ledger: Ledger,
    *,
    worker_name: str,
    adopted: bool,
    on_state: StateListener | None = None,
    beat_ledger: Ledger | None = None,
    claimed: Claimed | None = None,
) -> Outcome:
    """Run (or, `adopted`, resume) a job this process now owns, under a renewed lease.
    `beat_ledger`: the lease's own client (short retries); a worker keeps one for all its jobs.
    `claimed`: the claim also moved the job to ALLOCATING and recorded its owner's host."""
    try:
        beat, deps = _wire(
            spec, owner, settings, ledger, worker_name, on_state, beat_ledger, claimed
        )
    except (OSError, ColabqError) as exc:
        if adopted or isinstance(exc, LedgerError):
            raise
        # This host could not set the job up: the claim is given back, untouched.
        ledger.release_lock(spec.job_id, owner)
        why = exc.advice() if isinstance(exc, ColabqError) else f"{type(exc).__name__}: {exc}"
        attempt = Attempt(time.time(), worker_name, Cause.HOST, f"local setup failed: {why}")
        state, reason = give_back_host(ledger, spec.job_id, owner, attempt, settings.poison_hosts)
        return Outcome(state, reason, put_back=Cause.HOST.value)
    try:
        with beat:
            if adopted:
                return resume_job(spec, owner, deps)
            return run_job(spec, owner, deps, claimed)
    finally:
        ledger.release_lock(spec.job_id, owner)


def _wire(
    spec: JobSpec,
    owner: str,
    settings: Settings,
    ledger: Ledger,
    worker_name: str,
    on_state: StateListener | None,
    beat_ledger: Ledger | None,
    claimed: Claimed | None = None,
) -> tuple[Heartbeat, RunnerDeps]:
    """The lease and the runner's side effects, built on this host (its files, its CLI
    state, its Hub token); the owner recorded."""
    from worker.store.hub import HubStore

    files = JobFiles(job_dir(settings, spec.job_id)).ensure()
    clock = SystemClock()
    token = read_token(token_path(spec, settings))  # this job's: its destination's, its user's
    hub = HubStore(settings.hub_endpoint(), token)
    # The job's state as this owner last recorded it: what its record says again if Redis
    # loses it (a restart without persistence) while the job runs.
    last = [JobState.ALLOCATING if claimed else ledger.state_of(spec.job_id)]
    listener = on_state or (lambda state, reason: None)

    def noted(state: JobState, reason: str) -> None:
        last[0] = state
        listener(state, reason)

    beat_ledger = beat_ledger or build_ledger(settings, retry_s=1.0)
    beat = Heartbeat(
        # Its own client with a short retry budget: an outage never stalls the beat.
        beat_ledger,
        spec.job_id,
        owner,
        interval_s=settings.heartbeat_interval_s,
        ttl_s=settings.lease_ttl_s,
        on_beat=files.beat_runner,
        restore=lambda: beat_ledger.restore(
            spec,
            owner,
            last[0],
            settings.lease_ttl_s,
            owner_host=host_id(settings),
            held_since=_endpoint_recorded_at(files),
            **_session_of(files),
            **({"account": settings.account} if settings.account else {}),
        ),
    )
    deps = RunnerDeps(
        clock=clock,
        ledger=ledger,
        driver=build_driver(settings, spec.job_id),
        store=build_store(spec.artifact, endpoint=settings.hub_endpoint(), token=token),
        check_input=hub.exists_nonempty,
        settings=settings,
        files=files,
        start_watchdog=lambda f, env: start_watchdog(f, env, clock=clock),
        worker_name=worker_name,
        on_state=noted,
        on_progress=getattr(listener, "progress", lambda text: None),
        fence=lambda: beat.fence(settings.redis_retry_s),
        served_gpus=settings.worker_gpus,
    )
    if claimed is None:
        ledger.set_fields(spec.job_id, owner=owner, owner_host=host_id(settings))
    elif settings.account:
        # The job's Colab account, recorded before anything is allocated: only a host of this
        # account will act on the VM it gets (`worker.accounts`).
        ledger.set_fields(spec.job_id, owner=owner, account=settings.account)
    return beat, deps


def _endpoint_recorded_at(files: JobFiles) -> float | None:
    """When this host recorded the session's endpoint (its file, written once as `colab new`
    returns): where the held-time clock of a restored record starts."""
    name = _session_of(files).get("session")
    try:
        return (files.root / "endpoints" / name).stat().st_mtime if name else None
    except OSError:
        return None


def _session_of(files: JobFiles) -> dict[str, str]:
    """The session name and endpoint the job's own CLI record holds, if any."""
    try:
        records = json.loads(files.cli_config.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    for name, rec in records.items() if isinstance(records, dict) else ():
        if isinstance(rec, dict) and rec.get("endpoint"):
            return {"session": str(name), "endpoint": str(rec["endpoint"])}
    return {}


def find_orphaned(settings: Settings, *, handed_over: bool = True) -> list[str]:
    """Jobs in this host's state dir whose owner process is dead and that are not over (and,
    with `handed_over`, those whose owner handed them over: a restarted worker looks at both;
    a running one only at owners that died under it, a pool process killed)."""
    root = settings.state_dir / "jobs"
    found = []
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        if ids.job_id(d.name) is None:  # not a job's folder: nothing to take back
            continue
        state = JobFiles(d).read_runner()
        if state is None or state.phase is Phase.DONE:
            continue
        # An owner that handed over stopped acting, alive or not.
        if state.phase is Phase.HANDED_OVER:
            if handed_over:
                found.append(d.name)
            continue
        if state.runner and state.runner.alive():
            continue
        found.append(d.name)
    return found


def adopt_job(
    job_id: str,
    settings: Settings,
    ledger: Ledger,
    *,
    worker_name: str,
    on_state: StateListener | None = None,
    beat_ledger: Ledger | None = None,
) -> Outcome | None:
    """Take over `job_id` if its owner is gone, and finish it; None if it needs no owner (it
    is over) or has a live one (its lock is held by an owner that may be alive)."""
    job_id = ids.job_id(job_id) or refuse("job id", "the job to adopt", job_id)
    rec = ledger.get(job_id)
    if rec.state in TERMINAL or rec.state is JobState.QUEUED:
        local = JobFiles(job_dir(settings, job_id))
        if local.root.is_dir() and local.read_runner() is not None:
            local.write_runner(Phase.DONE)  # nothing of it is this host's to take back any more
        return None
    # A host of another account never acts on the job's VM: its `colab status` cannot see it,
    # and "not found" would read as a lost VM (restarted here, while it runs on there).
    check_may_act(job_id, rec.get("account"), settings)
    # Only the job's own VM: a colabq name, and the endpoint the index maps to this job.
    name, endpoint = rec.get("session"), rec.get("endpoint")
    check_vm(ledger, job_id, name, endpoint, settings.session_prefix)
    new_owner = secrets.token_hex(16)
    if not _take(ledger, rec.owner, job_id, new_owner, settings):
        return None
    files = JobFiles(job_dir(settings, job_id)).ensure()
    script = files.root / SCRIPT
    if not script.exists():  # adopted from another host: the job's script lived there
        script.write_text(rec.spec.script)
    if name and endpoint:
        try:
            write_adoption_record(
                files.cli_config, name, endpoint,
                accelerator=rec.get("gpu") or rec.spec.gpu.value, high_mem=rec.spec.high_mem,
            )  # fmt: skip
            files.record_endpoint(name, endpoint)
        except (ColabqError, ValueError) as exc:
            ledger.release_lock(job_id, new_owner)
            raise ColabqError(f"Cannot adopt job {job_id}: {exc}") from exc
    return own_job(
        rec.spec, new_owner, settings, ledger,
        worker_name=worker_name, adopted=True, on_state=on_state, beat_ledger=beat_ledger,
    )  # fmt: skip


def _take(ledger: Ledger, old_owner: str, job_id: str, new_owner: str, s: Settings) -> bool:
    """The lock, if it is free (the lease expired) or held by an owner of this host whose
    process is provably dead (a restarted worker need not wait for the TTL)."""
    if ledger.adopt(job_id, new_owner, s.lease_ttl_s):
        return True
    state = JobFiles(job_dir(s, job_id)).read_runner()
    ours = ledger.get(job_id).get("owner_host") == host_id(s)
    dead = state is not None and (state.runner is None or not state.runner.alive())
    return ours and dead and ledger.take_over(job_id, old_owner, new_owner, s.lease_ttl_s)


def adopt_orphans(settings: Settings, *, worker_name: str) -> list[str]:
    """What a worker does when it starts: adopt and finish its own orphaned jobs, one by one
    (one slot is one session). Returns the ids it handled."""
    ledger = build_ledger(settings)
    done = []
    for job_id in find_orphaned(settings):
        try:
            if adopt_job(job_id, settings, ledger, worker_name=worker_name) is not None:
                done.append(job_id)
        except ColabqError as exc:
            print(f"colabq: could not adopt {job_id}: {exc.advice()}", flush=True)
    return done


__all__ = ["adopt_job", "adopt_orphans", "find_orphaned", "host_id", "own_job"]
