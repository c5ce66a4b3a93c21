"""One janitor pass: read (a few pipelined round trips), find (`classify`), act, report.

One pass at a time, whatever runs beat (a Redis lock, set-if-absent with expiry, token-checked
release). Every pass is a report: each row what it saw, what it did (or, in a dry run, would do)
or left alone, and why. A dry run makes no remote call (no Colab, no Hub, no tracker) and
changes nothing; the account is then "not measured", which is not "found none". Ended jobs'
tracker runs still "running" are closed (`ghosts`), those of jobs this pass settled included.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from worker.colab.parse import ServerSession
from worker.errors import ColabqError
from worker.janitor.beats import watchdog_lost_after_s
from worker.janitor.classify import Do, Finding, find_account_findings, find_job_findings
from worker.janitor.ghosts import check_runs
from worker.janitor.reconcile import Stray, find_strays, queue_restore
from worker.janitor.report import JanitorReport as JanitorReport  # importers read it here
from worker.janitor.report import Row as Row
from worker.janitor.report import collapse_left_alone as collapse_left_alone
from worker.janitor.settle import Verifier, settle_from_store, settle_job, settle_outcome
from worker.janitor.snapshot import (
    JobView,
    Junk,
    TrackedRun,
    read_endpoint_owners,
    read_snapshot,
    read_views,
)
from worker.metrics.counts import count_janitor
from worker.records import ids
from worker.records.ledger import Ledger
from worker.records.record import JobRecord
from worker.records.tail import forward_stored_tail
from worker.records.unheld import clear_dead_claim
from worker.records.vms import index_owner, vm_problem
from worker.spec import JobSpec
from worker.states import JobState
from worker.tracker.runs import TrackerRuns

ADOPT_MARK_S = 120  # an adopter this pass started has this long to take the job's lock

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JanitorDeps:
    """The side effects of a pass; `worker.janitor.wiring` builds the real ones."""

    ledger: Ledger
    verify: Verifier  # with this host's Hub token and endpoint
    location: Callable[[JobSpec], str]
    account: Callable[[], list[ServerSession]]  # `colab sessions` (remote)
    stop_orphan: Callable[[JobView, str], str]  # (job, endpoint) -> what was done (remote)
    adopt: Callable[[str], str]  # start an adopter for the job -> what was done
    resend: Callable[[JobSpec], str]  # send a QUEUED job's message again
    queued_ids: Callable[[], set[str]]  # jobs whose message waits in a queue (Redis)
    # A watchdog beat older than this is missed (`beats`: derived from its poll interval).
    watchdog_stale_s: float = watchdog_lost_after_s(15.0)
    orphan_grace_s: float = 90.0
    stranded_grace_s: float = 600.0
    # The trackers this host reaches, by kind ("mlflow", "wandb"); a ghost run is deleted
    # instead of finished only where the user configured it.
    trackers: Mapping[str, TrackerRuns] = field(default_factory=dict)
    delete_ghosts: bool = False
    # This host's Colab account: `me(remote)` is the setting, else (only when `remote`: never
    # in a dry run) what `colab whoami` says; None: unknown. It names the pass's lock, and no
    # job of another account is adopted here.
    me: Callable[[bool], str | None] = lambda remote: None
    # After a pass that listed the account: remember the account's balance (`colab usage`).
    note_usage: Callable[[str], None] = lambda account: None
    # (spec, segment, offset) -> the console copy a segment's final upload stored, from that
    # offset on (None: no copy): a settled job's last lines, when its VM went first.
    console_tail: Callable[[JobSpec, int, int], bytes | None] = lambda spec, seg, at: None
    # colabq's session names start with it (`Settings.session_prefix`): no other is adopted.
    session_prefix: str = "colabq-"
    # Keys of the database each pass walks for live jobs missing from `active` (0: none).
    reconcile_keys: int = 0


def janitor_pass(
    deps: JanitorDeps,
    *,
    dry_run: bool,
    lock_ttl_s: float = 300.0,
    wait_s: float = 0.0,
    unless_ran_within_s: float | None = None,
) -> JanitorReport:
    """One pass for this host's account, under the account's lock (waiting up to `wait_s` for
    it). `unless_ran_within_s`: skip it if a pass of the account started that recently (a
    worker host's duty, `duty`, steps in only where no beat or other host runs the account's)."""
    ledger = deps.ledger
    try:
        me = deps.me(not dry_run)
        unknown = None
    except ColabqError as exc:
        me, unknown = None, Row("account", "colab whoami", "-", "failed", exc.advice())
    token = secrets.token_hex(16)
    deadline = ledger.clock.time() + wait_s
    while not ledger.try_janitor_lock(token, lock_ttl_s, me or ""):
        if ledger.clock.time() >= deadline:
            return JanitorReport(ran=False, dry_run=dry_run, account=me)
        ledger.clock.sleep(0.2)
    try:
        now = ledger.clock.time()
        if unless_ran_within_s is not None and not dry_run:
            last = ledger.r.hget(ledger.keys.janitor_passes(), me or "")
            if last is not None and now - float(last) < unless_ran_within_s:
                why = f"a pass of this account ran {now - float(last):.0f}s ago; skipped"
                return JanitorReport(ran=False, dry_run=dry_run, account=me, skipped=why)
        if not dry_run:
            ledger.r.hset(ledger.keys.janitor_passes(), me or "", repr(now))
        report = _pass(deps, dry_run, me)
        if unknown is not None:
            report = dataclasses.replace(report, rows=(unknown, *report.rows))
        return report
    finally:
        ledger.release_janitor_lock(token, me or "")


def _pass(deps: JanitorDeps, dry_run: bool, me: str | None = None) -> JanitorReport:
    ledger = deps.ledger
    walk = find_strays(ledger, deps.reconcile_keys, dry_run=dry_run)
    snap = read_snapshot(ledger)
    known = {j.job_id for j in snap.jobs}
    if extra := [s.job_id for s in walk.strays if s.job_id not in known]:
        snap = dataclasses.replace(snap, jobs=(*snap.jobs, *read_views(ledger, extra)))
    # The queues are read only when a QUEUED job needs them (one more round trip).
    ask_queues = any(
        j.state is JobState.QUEUED
        and not j.lock_held
        and (j.owner or snap.now - j.created_at >= deps.stranded_grace_s)
        for j in snap.jobs
    )
    waiting = deps.queued_ids() if ask_queues else set()
    findings = find_job_findings(
        snap,
        watchdog_stale_s=deps.watchdog_stale_s,
        stranded_grace_s=deps.stranded_grace_s,
        queued_ids=waiting,
        me=me,
    )
    verb = "would" if dry_run else "did"
    rows = [
        Row("index entry", j.key, j.shown, f"{verb}: drop it", "not a job id") for j in snap.junk
    ]
    back = f"{verb}: put it back in {ledger.keys.active()}"
    why = "not over, yet missing from the index of live jobs"
    rows += [Row("job", s.job_id, s.state.upper(), back, why) for s in walk.strays]
    measured = False
    if not dry_run:
        try:
            assignments = deps.account()
            measured = True
        except ColabqError as exc:
            assignments = []
            rows.append(Row("account", "colab sessions", "-", "failed", exc.advice()))
        if measured:
            findings += _account(ledger, snap.jobs, assignments, deps, snap.now, me or "")
            if me is not None:
                deps.note_usage(me)
    settled: list[TrackedRun] = []  # jobs this pass ended: their runs are checked now too
    rows += [_act(deps, f, dry_run, settled, waiting) for f in findings]
    ghost_rows, checked = check_runs(
        [*snap.tracked, *settled], deps.trackers, dry_run=dry_run, delete=deps.delete_ghosts
    )
    rows += collapse_left_alone(
        [Row("tracker run", g.subject, g.seen, g.did, g.why) for g in ghost_rows]
    )
    if not dry_run:
        fixes = Fixes(walk.strays, snap.junk)
        _write_batch(ledger, findings, snap.now, checked, account=me or "", rows=rows, fixes=fixes)
    return JanitorReport(True, dry_run, tuple(rows), measured, me)


def _account(
    ledger: Ledger,
    views: tuple[JobView, ...],
    assignments: list[ServerSession],
    deps: JanitorDeps,
    now: float,
    account: str,
) -> list[Finding]:
    endpoints = [a.endpoint for a in assignments]
    owners, first_seen = read_endpoint_owners(ledger, endpoints, account)
    jobs = {v.job_id: v for v in views}
    missing = sorted(set(owners.values()) - set(jobs))
    jobs.update({v.job_id: v for v in read_views(ledger, missing)})
    # First-seen times: what the account lists now keeps its time, new ones start now, the rest
    # are forgotten (one round trip).
    pipe = ledger.r.pipeline(transaction=False)
    for ep in endpoints:
        if ep not in first_seen:
            pipe.hset(ledger.keys.first_seen(account), ep, repr(now))
    gone = [ep for ep in first_seen if ep not in set(endpoints)]
    if gone:
        pipe.hdel(ledger.keys.first_seen(account), *gone)
    pipe.execute()
    return find_account_findings(
        assignments, owners, jobs, first_seen, now=now, grace_s=deps.orphan_grace_s,
        watchdog_stale_s=deps.watchdog_stale_s,
    )  # fmt: skip


def _act(
    deps: JanitorDeps,
    f: Finding,
    dry_run: bool,
    settled: list[TrackedRun] | None = None,
    waiting: set[str] | frozenset[str] = frozenset(),
) -> Row:
    def row(did: str, why: str = f.why) -> Row:
        return Row(f.kind, f.subject, f.seen, did, why)

    if f.do is Do.LEAVE:
        return row("left alone")
    if dry_run or f.do in (Do.DROP_LEASE, Do.FORGET):
        return row(f"{'would' if dry_run else 'did'}: {f.do.value}")
    try:
        return _act_on(deps, f, settled, waiting)
    except ColabqError as exc:
        return row(f"failed: {f.do.value}", exc.advice())
    except Exception as exc:  # anything else fails this finding alone; the pass goes on
        log.error("janitor: %s %s (%s) failed: %s", f.kind, f.subject, f.do.value, exc,
                  exc_info=True)  # fmt: skip
        return row(f"failed: {f.do.value}", f"{type(exc).__name__}: {exc}"[:300])


def _act_on(
    deps: JanitorDeps,
    f: Finding,
    settled: list[TrackedRun] | None,
    waiting: set[str] | frozenset[str],
) -> Row:
    def row(did: str, why: str = f.why) -> Row:
        return Row(f.kind, f.subject, f.seen, did, why)

    if f.do is Do.SETTLE:
        return _settle(deps, f, settled)
    if f.do is Do.SETTLE_STORED:
        return _settle(deps, f, settled, from_store=True)
    if f.do is Do.ADOPT:
        if why := _not_its_vm(deps, f.subject):
            return row("left alone", f"not adopted: its record names a VM not its own ({why})")
        key = deps.ledger.keys.adopting(f.subject)
        if not deps.ledger.r.set(key, "1", nx=True, ex=ADOPT_MARK_S):
            return row("left alone", "an adopter was started for it moments ago")
        return row(f"did: adopt ({deps.adopt(f.subject)})")
    if f.do is Do.RESEND:
        rec = deps.ledger.get(f.subject)
        now = repr(deps.ledger.clock.time())
        deps.ledger.set_fields(f.subject, owner=rec.owner, resent_at=now)
        return row(f"did: send again ({deps.resend(rec.spec)})")
    if f.do is Do.UNCLAIM:
        return _unclaim(deps, f, f.subject in waiting)
    if f.do is Do.STOP_ORPHAN:
        assert f.job_id is not None
        [view] = read_views(deps.ledger, [f.job_id])
        return row(f"did: stop orphan ({deps.stop_orphan(view, f.subject)})")
    raise AssertionError(f"unhandled finding {f.do}")


def _not_its_vm(deps: JanitorDeps, job_id: str) -> str | None:
    """Why the VM job `job_id`'s record names is not its own (`records.vms`), or None."""
    raw = deps.ledger.r.hmget(deps.ledger.keys.job(job_id), "session", "endpoint")
    name, endpoint = (ids.text(v) for v in raw)
    owner = index_owner(deps.ledger, endpoint)
    return vm_problem(job_id, name, endpoint, owner, deps.session_prefix)


def _unclaim(deps: JanitorDeps, f: Finding, waiting: bool) -> Row:
    """Clear a dead claimant's claim (atomically, only while its lock is still absent), then
    send the job's message again unless one waits in a queue."""
    ledger = deps.ledger
    rec = ledger.get(f.subject)
    if rec.state is not JobState.QUEUED or not rec.owner:
        return Row(f.kind, f.subject, f.seen, "left alone", f"no longer claimed ({rec.state.name})")
    if not clear_dead_claim(ledger, f.subject, rec.owner):
        return Row(f.kind, f.subject, f.seen, "left alone", "its claimant holds its lock again")
    if waiting:
        return Row(f.kind, f.subject, f.seen, "did: clear dead claim (its message waits)", f.why)
    ledger.set_fields(f.subject, owner="", resent_at=repr(ledger.clock.time()))
    return Row(
        f.kind, f.subject, f.seen, f"did: clear dead claim; send again ({deps.resend(rec.spec)})",
        f.why,
    )  # fmt: skip


def _settle(
    deps: JanitorDeps,
    f: Finding,
    settled: list[TrackedRun] | None = None,
    *,
    from_store: bool = False,
) -> Row:
    ledger = deps.ledger
    rec = ledger.get(f.subject)
    cancel = ledger.cancel_requested(f.subject)
    if from_store:
        s = settle_from_store(rec, deps.verify, cancel)
        if s is None:
            why = f"{f.why}; the store shows no end yet"
            return Row(f.kind, f.subject, f.seen, "left alone", why)
    else:
        s = settle_outcome(rec, ledger.read_watch(f.subject), deps.verify, cancel)
    if s is None:
        return Row(f.kind, f.subject, f.seen, "left alone", "its session is not verified gone")
    tail = _take_stored_tail(deps, rec)
    if not settle_job(ledger, f.subject, s, deps.location(rec.spec), vm_seen=not from_store):
        return Row(f.kind, f.subject, f.seen, "left alone", "its owner renewed the lease meanwhile")
    if settled is not None and (run := rec.get("tracker_run")):
        settled.append(TrackedRun(f.subject, run, s.state, s.reason, deps.ledger.clock.time()))
    return Row(f.kind, f.subject, f.seen, f"did: settle {s.state.name}", s.reason + tail)


def _take_stored_tail(deps: JanitorDeps, rec: JobRecord) -> str:
    """Before the job is reported ended: its console's last lines that no attach client
    forwarded, from the copy its final upload stored (said on the job's log too)."""
    raw = rec.get("segment") or "0"
    segment, nonce = (int(raw) if raw.isdigit() else 0), rec.get("nonce") or ""
    if not nonce:
        return ""
    try:
        tail = forward_stored_tail(
            deps.ledger, rec.job_id, segment, nonce,
            lambda offset: deps.console_tail(rec.spec, segment, offset),
        )  # fmt: skip
    except ColabqError as exc:
        return f"; its console's stored copy could not be read: {exc.advice()}"
    said = tail.summary() if tail.found else ""
    if said:
        deps.ledger.append_log(rec.job_id, f"[janitor] {said}", stream="colabq")
    return f"; {said}" if said else ""


def _write_batch(
    ledger: Ledger,
    findings: list[Finding],
    now: float,
    checked: list[str] | None = None,
    *,
    account: str = "",
    rows: list[Row] | None = None,
    fixes: Fixes | None = None,
) -> None:
    """Lease entries of finished jobs, forgotten active entries, tracker runs checked,
    retention, the indexes' repairs (`fixes`), and the pass's actions counted for `colabq
    metrics`: one round trip."""
    k = ledger.keys
    drop = [f.subject for f in findings if f.do is Do.DROP_LEASE]
    forget = [f.subject for f in findings if f.do in (Do.FORGET, Do.DROP_LEASE)]
    pipe = ledger.r.pipeline(transaction=False)
    if drop:
        pipe.zrem(k.leases(), *drop)
    if forget:
        pipe.srem(k.active(), *forget)
    if checked:
        pipe.zrem(k.tracker_check(), *checked)
    # Records expire by themselves (a TTL set when the job ended); the index of jobs follows.
    pipe.zremrangebyscore(k.jobs(), "-inf", now - ledger.retention_s)
    pipe.zremrangebyscore(k.tracker_check(), "-inf", now - ledger.retention_s)
    if fixes is not None:
        queue_restore(pipe, ledger, fixes.strays)
        for j in fixes.junk:  # an index's member that is no job id
            (pipe.srem if j.key == k.active() else pipe.zrem)(j.key, j.raw)
    count_janitor(pipe, k, account, rows or [])
    pipe.execute()


@dataclass(frozen=True)
class Fixes:
    """What a pass repairs in the indexes: live jobs put back, junk members dropped."""

    strays: tuple[Stray, ...] = ()
    junk: tuple[Junk, ...] = ()
