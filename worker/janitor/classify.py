"""What a janitor pass finds, as pure functions of what it read and the time.

Jobs: an owner that died is adopted (its host and watchdog are gone too: its lease expired and
its watchdog missed its beats, `beats`) by a janitor of the job's Colab account only (another
account's janitor settles it from what the store proves, or leaves it), or, once its watchdog
released the session, settled from what was recorded; a RETAINED job whose owner died is adopted
whatever its watchdog does (the adopter recovers the only copy of its results, then releases the
VM); a QUEUED job whose claimant is gone (owner set, no lock) has its claim cleared and is sent
again; a QUEUED job no queue holds is sent again, once. Assignments on the account: **live**
(their job's owner or watchdog lives), **colabq's orphan** (recorded on a job that is over, or
whose owners are all dead, and seen longer than the grace period: stopped), **unknown** (no
colabq record: never stopped, reported with how long it has been seen). Finding is kept apart
from acting (`run.py`); nothing here has a side effect.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from worker.accounts.names import same_account
from worker.colab.parse import ServerSession
from worker.janitor.snapshot import JobView, Snapshot
from worker.records import ids
from worker.states import TERMINAL, JobState


class Do(StrEnum):
    SETTLE = "settle"
    # Settle only from what the store proves (the VM is on an account this janitor does not
    # hold: it never acts on it), else leave it to a janitor of that account.
    SETTLE_STORED = "settle from the store"
    ADOPT = "adopt"
    RESEND = "send again"
    UNCLAIM = "clear dead claim"
    DROP_LEASE = "drop lease entry"
    FORGET = "forget"
    STOP_ORPHAN = "stop orphan"
    LEAVE = "leave alone"


@dataclass(frozen=True)
class Finding:
    do: Do
    kind: str  # "job" or "assignment"
    subject: str  # a job id or an endpoint
    job_id: str | None
    seen: str  # the job's state, or how long the assignment has been seen
    why: str


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds // 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def watchdog_alive(job: JobView, now: float, stale_s: float) -> bool:
    return job.watchdog_beat_at is not None and now - job.watchdog_beat_at <= stale_s


def find_job_findings(
    snap: Snapshot,
    *,
    watchdog_stale_s: float,
    stranded_grace_s: float,
    queued_ids: set[str] | None,
    me: str | None = None,
) -> list[Finding]:
    """`queued_ids`: jobs whose message waits in a queue (None: not measured). `me`: the Colab
    account of this janitor's host (None: unknown); a job of another account is never adopted
    here (`worker.accounts`)."""
    out = []
    for job in snap.jobs:
        seen = job.state.name if job.state else "no record"
        if job.state is None:
            out.append(
                Finding(Do.FORGET, "job", job.job_id, job.job_id, seen, "its record is gone")
            )
        elif job.state in TERMINAL:
            if job.lease_expired:
                out.append(
                    Finding(Do.DROP_LEASE, "job", job.job_id, job.job_id, seen, "already over")
                )
            else:
                out.append(Finding(Do.FORGET, "job", job.job_id, job.job_id, seen, "over"))
        elif job.state is JobState.QUEUED:
            out += _queued(job, snap.now, stranded_grace_s, queued_ids)
        elif not job.lock_held:
            out.append(_ownerless(job, snap.now, watchdog_stale_s, me))
    return out


def _queued(job: JobView, now: float, grace_s: float, queued_ids: set[str] | None) -> list[Finding]:
    age = now - job.created_at
    if job.lock_held:
        return []
    if job.owner:
        # Its claimant's lease is gone (it died, or its claim never ran): every worker skips a
        # job another runner owns, so nothing takes it until the claim is cleared.
        why = f"claimed by {job.owner[:12]}, whose lease is gone (the claimant died or never ran)"
        if queued_ids is not None and job.job_id in queued_ids:
            why += "; its message waits in a queue"
        return [Finding(Do.UNCLAIM, "job", job.job_id, job.job_id, "QUEUED", why)]
    if job.retry_at is not None:
        # Waiting for a GPU: a worker sends it when its next try is due (`fleet.prober`); one
        # long overdue had no worker to send it, and the janitor does.
        if now < job.retry_at + max(grace_s, 60.0):
            return []
        why = f"its next try for a GPU was due {_age(now - job.retry_at)} ago; no worker sent it"
        return [Finding(Do.RESEND, "job", job.job_id, job.job_id, "QUEUED", why)]
    if age < grace_s:
        return []
    if job.resent_at is not None:
        why = f"sent again {_age(now - job.resent_at)} ago; waiting for a worker"
        return [Finding(Do.LEAVE, "job", job.job_id, job.job_id, "QUEUED", why)]
    if queued_ids is None:
        return [Finding(Do.LEAVE, "job", job.job_id, job.job_id, "QUEUED", "queues not read")]
    if job.job_id in queued_ids:
        return []  # waiting its turn
    why = f"queued {_age(age)} ago and no queue holds its message (lost, or its worker died)"
    return [Finding(Do.RESEND, "job", job.job_id, job.job_id, "QUEUED", why)]


def _ownerless(job: JobView, now: float, stale_s: float, me: str | None) -> Finding:
    seen = job.state.name if job.state else "?"
    if job.gone_verified:
        return Finding(
            Do.SETTLE, "job", job.job_id, job.job_id, seen, "owner gone; session verified gone"
        )
    if not same_account(job.account, me):
        return _foreign(job, now, stale_s, me)
    if job.state is JobState.RETAINED:
        why = (
            "owner gone; its VM holds the only copy of the results: adopt it to recover them "
            "(to the store, else the adopter's host) and then release the VM"
        )
        if job.reason:
            why += f" (last: {job.reason})"
        return Finding(Do.ADOPT, "job", job.job_id, job.job_id, seen, why)
    if watchdog_alive(job, now, stale_s):
        assert job.watchdog_beat_at is not None
        why = (
            f"owner gone; its watchdog (beat {_age(now - job.watchdog_beat_at)} ago) keeps the "
            "caps; a restarted worker takes it back"
        )
        return Finding(Do.LEAVE, "job", job.job_id, job.job_id, seen, why)
    why = "owner and watchdog gone (its host is lost): adopt it and finish it from here"
    return Finding(Do.ADOPT, "job", job.job_id, job.job_id, seen, why)


def _foreign(job: JobView, now: float, stale_s: float, me: str | None) -> Finding:
    """A dead owner's job whose VM is on another account than this janitor's: its `colab
    sessions` and `colab status` cannot see that VM (not listed is not lost), so nothing here
    acts on it."""
    seen = job.state.name if job.state else "?"
    mine = f"this janitor is of {me}" if me else "this janitor's account is unknown"
    left = f"left for a janitor of {job.account} ({mine})"
    if job.state is JobState.RETAINED:
        why = f"owner gone; its VM on {job.account} holds the only copy of the results: {left}"
        return Finding(Do.LEAVE, "job", job.job_id, job.job_id, seen, why)
    if watchdog_alive(job, now, stale_s):
        why = f"owner gone; its watchdog keeps the caps; its VM is on {job.account}: {left}"
        return Finding(Do.LEAVE, "job", job.job_id, job.job_id, seen, why)
    why = (
        f"owner and watchdog gone; its VM is on {job.account}: settled if the store proves how "
        f"it ended, else {left}"
    )
    return Finding(Do.SETTLE_STORED, "job", job.job_id, job.job_id, seen, why)


def find_account_findings(
    assignments: Sequence[ServerSession],
    owners: Mapping[str, str],
    jobs: Mapping[str, JobView],
    first_seen: Mapping[str, float],
    *,
    now: float,
    grace_s: float,
    watchdog_stale_s: float,
) -> list[Finding]:
    """One finding per assignment the account holds."""
    out = []
    for a in assignments:
        ep = a.endpoint
        age = now - first_seen.get(ep, now)
        seen = f"{_age(age)} ({a.hardware})"
        job_id = owners.get(ep)
        job = jobs.get(job_id) if job_id else None
        if ids.endpoint(ep) is None:
            why = "not an endpoint colabq acts on (its grammar, `worker.records.ids`): reported"
            out.append(Finding(Do.LEAVE, "assignment", ids.shown(ep), None, seen, why))
            continue
        if job_id is None or job is None:
            why = (
                "no colabq record (a notebook, another tool, or a `colab new` killed before it "
                "wrote its state): never stopped by colabq"
            )
            out.append(Finding(Do.LEAVE, "assignment", ep, job_id, seen, why))
            continue
        over = job.state is None or job.state in TERMINAL
        if not over and (job.lock_held or watchdog_alive(job, now, watchdog_stale_s)):
            why = f"live: job {job_id} ({job.state.name if job.state else '?'})"
            if job.state is JobState.RETAINED and job.reason:
                why += f": {job.reason}"  # a recovery that keeps failing says so, every pass
            out.append(Finding(Do.LEAVE, "assignment", ep, job_id, seen, why))
        elif not over:
            why = f"its job {job_id} has no live owner: the adopter releases it"
            out.append(Finding(Do.LEAVE, "assignment", ep, job_id, seen, why))
        elif age < grace_s:
            why = f"colabq's orphan (job {job_id} is over); stopped after {_age(grace_s)}"
            out.append(Finding(Do.LEAVE, "assignment", ep, job_id, seen, why))
        else:
            why = f"colabq's orphan: job {job_id} is over and its VM is still assigned"
            out.append(Finding(Do.STOP_ORPHAN, "assignment", ep, job_id, seen, why))
    return out
