"""The beat-scheduled janitor: finds what crashed and settles what it safely can.

One pass at a time (a Redis lock, set-if-absent with expiry, token-checked release), every pass a
report of what it saw, did, and left alone and why; `dry_run` acts on nothing. Scans (`find_*`)
only find; `janitor_pass` decides. This version settles expired leases of jobs that never had a
session; jobs whose dead owner held a session are reported for adoption, never touched blindly.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from worker.ledger import Ledger
from worker.states import TERMINAL, JobState


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
        head = f"janitor{' (dry run)' if self.dry_run else ''}: {len(self.expired)} expired lease(s)"
        return [head, *(f"did: {a}" for a in self.acted), *(f"left: {x}" for x in self.left_alone)]


def find_expired_leases(ledger: Ledger, now: float) -> list[str]:
    raw = ledger.r.zrangebyscore(ledger.keys.leases(), "-inf", now)
    return [r.decode() for r in raw]


def janitor_pass(ledger: Ledger, *, dry_run: bool, lock_ttl_s: float = 300.0) -> JanitorReport:
    token = secrets.token_hex(16)
    lock = ledger.keys.janitor_lock()
    if not ledger.r.set(lock, token, nx=True, px=int(lock_ttl_s * 1000)):
        return JanitorReport(ran=False, dry_run=dry_run)
    try:
        return _settle(ledger, find_expired_leases(ledger, ledger.clock.time()), dry_run)
    finally:
        if (cur := ledger.r.get(lock)) is not None and cur.decode() == token:
            ledger.r.delete(lock)


def _settle(ledger: Ledger, expired: list[str], dry_run: bool) -> JanitorReport:
    acted: list[str] = []
    left: list[str] = []
    for job_id in expired:
        rec = ledger.get(job_id)
        if rec.state in TERMINAL:
            if not dry_run:
                ledger.r.zrem(ledger.keys.leases(), job_id)
            acted.append(f"{job_id}: terminal ({rec.state.name}); lease entry dropped")
            continue
        if rec.get("endpoint"):
            left.append(f"{job_id}: owner gone while holding {rec.get('endpoint')}; needs adoption")
            continue
        if dry_run:
            acted.append(f"{job_id}: would settle FAILED_LOST (owner died before allocation)")
            continue
        adopter = secrets.token_hex(16)
        if not _adopt(ledger, job_id, rec.owner, adopter):
            left.append(f"{job_id}: its owner renewed the lease meanwhile")
            continue
        ledger.transition(
            job_id, JobState.FAILED_LOST, owner=adopter, reason="owner died before allocation"
        )
        ledger.release_lock(job_id, adopter)
        acted.append(f"{job_id}: settled FAILED_LOST (owner died before allocation)")
    return JanitorReport(True, dry_run, tuple(expired), tuple(acted), tuple(left))


def _adopt(ledger: Ledger, job_id: str, old_owner: str, new_owner: str) -> bool:
    """Take an expired job's lock and ownership from its dead owner."""
    if not ledger.r.set(ledger.keys.lock(job_id), new_owner, nx=True, px=60_000):
        return False
    ledger.r.hset(ledger.keys.job(job_id), "owner", new_owner)
    return True
