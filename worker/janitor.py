"""The beat-scheduled janitor: finds what crashed and settles what it safely can.

One pass at a time (a Redis lock, set-if-absent with expiry, token-checked release), every pass a
report of what it saw, did, and left alone and why; `dry_run` acts on nothing. Scans (`find_*`)
only find; `settle_outcome` decides from what the dead owner's exec client and watchdog recorded
in Redis; `janitor_pass` acts. A job whose session is not verified gone is never settled here:
its watchdog, on the worker host, still enforces the caps, and the janitor reports it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from worker.errors import ColabqError
from worker.records.ledger import JobRecord, Ledger
from worker.spec import JobSpec
from worker.states import HOLDS_SESSION, TERMINAL, JobState
from worker.store.artifacts import Verification, build_store

Verifier = Callable[[JobSpec], Verification]


@dataclass(frozen=True)
class JanitorReport:
    ran: bool
    dry_run: bool
    expired: tuple[str, ...] = ()
    acted: tuple[str, ...] = ()
    left_alone: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        if not self.ran:
            return ["another janitor pass holds the lock; skipped"]
        head = (
            f"janitor{' (dry run)' if self.dry_run else ''}: {len(self.expired)} expired lease(s)"
        )
        return [head, *(f"did: {a}" for a in self.acted), *(f"left: {x}" for x in self.left_alone)]


def find_expired_leases(ledger: Ledger, now: float) -> list[str]:
    return ledger.expired_leases(now)


def _verify_with_store(spec: JobSpec) -> Verification:
    return build_store(spec.artifact).verify(spec)


def settle_outcome(
    rec: JobRecord, watch: Mapping[str, str], verify: Verifier
) -> tuple[JobState, str] | None:
    """The terminal state of a job whose owner died, or None if it must be left alone."""
    endpoint = rec.get("endpoint") or watch.get("endpoint")
    if not endpoint:
        return JobState.FAILED_LOST, "owner died before a session was assigned"
    if not watch.get("gone_verified_at"):
        return None
    exit_raw = watch.get("exec_exit")
    if exit_raw is None or not exit_raw.lstrip("-").isdigit():
        return (
            JobState.FAILED_LOST,
            "owner died; the watchdog released the session; outcome unknown",
        )
    code = int(exit_raw)
    if watch.get("results_local"):
        return JobState.FAILED, (
            f"owner died; job exited {code}; the final upload failed and the watchdog recovered "
            f"the results to {watch['results_local']}"
        )
    try:
        v = verify(rec.spec)
    except ColabqError as exc:
        return JobState.FAILED, f"owner died; job exited {code}; artifacts unverifiable: {exc}"
    if not v.ok:
        return JobState.FAILED, f"owner died; job exited {code}; artifacts {v.summary()}"
    if code != 0:
        return JobState.FAILED, f"owner died; job exited {code}"
    return JobState.SUCCEEDED, "owner died; exit 0, artifacts verified, session released (watchdog)"


def janitor_pass(
    ledger: Ledger,
    *,
    dry_run: bool,
    lock_ttl_s: float = 300.0,
    verify: Verifier = _verify_with_store,
) -> JanitorReport:
    token = secrets.token_hex(16)
    if not ledger.try_janitor_lock(token, lock_ttl_s):
        return JanitorReport(ran=False, dry_run=dry_run)
    try:
        expired = find_expired_leases(ledger, ledger.clock.time())
        return _settle_all(ledger, expired, dry_run, verify)
    finally:
        ledger.release_janitor_lock(token)


def _settle_all(
    ledger: Ledger, expired: list[str], dry_run: bool, verify: Verifier
) -> JanitorReport:
    acted: list[str] = []
    left: list[str] = []
    for job_id in expired:
        rec = ledger.get(job_id)
        if rec.state in TERMINAL:
            if not dry_run:
                ledger.drop_lease(job_id)
            acted.append(f"{job_id}: already {rec.state.name}; lease entry dropped")
            continue
        watch = ledger.read_watch(job_id)
        outcome = settle_outcome(rec, watch, verify)
        if outcome is None:
            beat = watch.get("heartbeat_at", "never")
            left.append(
                f"{job_id}: owner gone, session {rec.get('endpoint') or watch.get('endpoint')} "
                f"not verified gone; its watchdog (last heartbeat {beat}) keeps the caps"
            )
            continue
        state, reason = outcome
        if dry_run:
            acted.append(f"{job_id}: would settle {state.name} ({reason})")
            continue
        adopter = secrets.token_hex(16)
        if not ledger.adopt(job_id, adopter, ttl_s=60.0):
            left.append(f"{job_id}: its owner renewed the lease meanwhile")
            continue
        if rec.state in HOLDS_SESSION and rec.state is not JobState.RELEASING:
            ledger.transition(
                job_id, JobState.RELEASING, owner=adopter, reason="janitor: owner died"
            )
        ledger.transition(
            job_id, state, owner=adopter, reason=reason, fields={"outcome": state.value}
        )
        ledger.release_lock(job_id, adopter)
        acted.append(f"{job_id}: settled {state.name} ({reason})")
    return JanitorReport(True, dry_run, tuple(expired), tuple(acted), tuple(left))
