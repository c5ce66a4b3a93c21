"""The janitor and accounts: a janitor never adopts a job whose VM is on another account (it
settles it only from what the store proves, else leaves it for that account's janitor and says
so); each account's passes keep their own lock and first-seen times; a worker host's duty steps
in only where no pass of its account ran lately."""

from __future__ import annotations

import dataclasses
import json

import fakeredis
import pytest

from tests.unit.test_janitor import NOW, OK, Calls, _owner_dies, _running_job, deps_for, sess, view
from worker.clock import FakeClock
from worker.fleet import health
from worker.janitor.classify import Do, find_job_findings
from worker.janitor.duty import JanitorDuty
from worker.janitor.run import JanitorDeps, JanitorReport, janitor_pass
from worker.janitor.snapshot import Snapshot
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.spec import JobSpec
from worker.states import JobState as S
from worker.store.artifacts import Verification

NO_EXIT = Verification(False, None, (), (), "no exit_code")

FOREIGN_CASES = [
    ("mine: adopt", view(account="a@x"), "a@x", Do.ADOPT, ""),
    ("from before accounts: adopt, as before", view(), "a@x", Do.ADOPT, ""),
    ("another account's: only the store may settle it", view(account="b@x"), "a@x",
     Do.SETTLE_STORED, "left for a janitor of b@x (this janitor is of a@x)"),
    ("this host's account unknown: never adopted", view(account="b@x"), None, Do.SETTLE_STORED,
     "this janitor's account is unknown"),
    ("another account's, its watchdog alive: leave", view(account="b@x",
     watchdog_beat_at=NOW - 5), "a@x", Do.LEAVE, "left for a janitor of b@x"),
    ("another account's RETAINED VM: never recovered here", view(account="b@x",
     state=S.RETAINED), "a@x", Do.LEAVE, "holds the only copy"),
    ("another account's, its session verified gone: settled from the records",
     view(account="b@x", gone_verified=True), "a@x", Do.SETTLE, ""),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "v", "me", "expect", "said"), FOREIGN_CASES, ids=[c[0] for c in FOREIGN_CASES]
)
def test_a_job_of_another_account_is_never_adopted(
    case: str, v: object, me: str | None, expect: Do, said: str
) -> None:
    snap = Snapshot(NOW, (v,), ("j1",))  # type: ignore[arg-type]
    [f] = find_job_findings(snap, watchdog_stale_s=90, stranded_grace_s=600, queued_ids=set(),
                            me=me)  # fmt: skip
    assert f.do is expect and said in f.why


@pytest.fixture
def ledger() -> Ledger:
    return Ledger(fakeredis.FakeRedis(), FakeClock(), Keys("t"), log_maxlen=100)


def of(ledger: Ledger, calls: Calls, me: str | None, store: Verification = OK) -> JanitorDeps:
    def verify(spec: JobSpec) -> Verification:
        calls.remote.append("verify")
        return store

    return dataclasses.replace(deps_for(ledger, calls), me=lambda remote: me, verify=verify)


def _lost_on(ledger: Ledger, account: str) -> str:
    job_id = _running_job(ledger)
    ledger.set_fields(job_id, owner="w1", account=account)
    _owner_dies(ledger, job_id)
    return job_id


def test_another_accounts_janitor_leaves_a_running_job_and_says_whose_it_is(
    ledger: Ledger,
) -> None:
    job_id = _lost_on(ledger, "b@x")
    calls = Calls(account=[sess("gpu-a1")])
    report = of(ledger, calls, "a@x", store=NO_EXIT)
    got = janitor_pass(report, dry_run=False)
    [row] = [r for r in got.rows if r.subject == job_id]
    assert row.did == "left alone" and "left for a janitor of b@x" in row.why, row
    assert "the store shows no end yet" in row.why
    assert not any(c.startswith(("adopt", "stop")) for c in calls.remote), calls.remote
    assert ledger.get(job_id).state is S.RUNNING and got.account == "a@x"
    # Its own account's janitor adopts it.
    mine = janitor_pass(of(ledger, calls, "b@x"), dry_run=False)
    assert [r.subject for r in mine.did("adopt")] == [job_id]


def test_another_accounts_janitor_settles_only_what_the_store_proves(ledger: Ledger) -> None:
    job_id = _lost_on(ledger, "b@x")
    got = janitor_pass(of(ledger, Calls(), "a@x"), dry_run=False)
    [row] = got.did("settle")
    assert row.subject == job_id and row.did == "did: settle SUCCEEDED", row
    rec = ledger.get(job_id)
    assert rec.state is S.SUCCEEDED and rec.get("exit_code") == "0"
    report = json.loads(rec.get("report") or "{}")
    assert report["account"] == "b@x" and report["remaining_endpoint"] == "gpu-1"
    assert report["runtime"] == "not looked at: left to the janitor of b@x"


def test_each_accounts_passes_keep_their_own_lock_and_first_seen_times(ledger: Ledger) -> None:
    ledger.r.set(ledger.keys.janitor_lock("b@x"), "a pass of b", px=60_000)
    a = janitor_pass(of(ledger, Calls(account=[sess("gpu-a1")]), "a@x"), dry_run=False)
    assert a.ran
    b = janitor_pass(of(ledger, Calls(account=[sess("gpu-b1")]), "b@x"), dry_run=False)
    assert not b.ran and b.lines() == ["another janitor pass holds the lock; skipped"]
    ledger.r.delete(ledger.keys.janitor_lock("b@x"))
    janitor_pass(of(ledger, Calls(account=[sess("gpu-b1")]), "b@x"), dry_run=False)
    ledger.clock.advance(30)  # type: ignore[attr-defined]
    janitor_pass(of(ledger, Calls(account=[sess("gpu-a1")]), "a@x"), dry_run=False)
    # A's pass, which does not list b's VM, does not forget when b's pass first saw it.
    assert ledger.r.hkeys(ledger.keys.first_seen("b@x")) == [b"gpu-b1"]
    assert ledger.r.hkeys(ledger.keys.first_seen("a@x")) == [b"gpu-a1"]


def test_a_pass_skips_when_its_account_ran_one_lately(ledger: Ledger) -> None:
    deps = of(ledger, Calls(), "a@x")
    assert janitor_pass(deps, dry_run=False).ran
    later = janitor_pass(deps, dry_run=False, unless_ran_within_s=90)
    assert not later.ran and later.skipped == "a pass of this account ran 0s ago; skipped"
    assert janitor_pass(of(ledger, Calls(), "b@x"), dry_run=False, unless_ran_within_s=90).ran
    ledger.clock.advance(91)  # type: ignore[attr-defined]
    assert janitor_pass(deps, dry_run=False, unless_ran_within_s=90).ran


def test_a_worker_steps_in_only_where_its_account_has_no_janitor(ledger: Ledger) -> None:
    ran: list[float] = []

    def run(within_s: float) -> JanitorReport:
        ran.append(within_s)
        return JanitorReport(ran=True, dry_run=False)

    def tick(now: float) -> bool:
        started = duty.tick(now)
        if started is not None:
            started.join(10)
        return started is not None

    duty = JanitorDuty(ledger, "w1", "a@x", 60.0, run, say=lambda line: None)
    now = duty.not_before - 1
    assert not tick(now)  # just started: the account's beat or other hosts first
    ledger.r.hset(ledger.keys.janitor_passes(), "a@x", repr(now + 1 - 30))
    assert not tick(now + 1)  # a pass of the account ran 30 s ago
    assert tick(now + 61) and ran == [90.0]  # none for 90 s: this worker's turn
    health.note_failure(ledger.r, ledger.keys, "w1", "401", now, probe_s=5, probe_max_s=300)
    assert not tick(now + 200)  # drained by a host failure: its login may be broken
    health.undrain(ledger.r, ledger.keys, "w1")
    health.drain_by_hand(ledger.r, ledger.keys, "w1", "maintenance", now, "ops")
    assert tick(now + 200)  # drained by hand: it still holds its login


def test_a_workers_pass_runs_beside_its_other_duties_one_at_a_time(ledger: Ledger) -> None:
    import threading

    release = threading.Event()

    def slow(within_s: float) -> JanitorReport:
        release.wait(10)
        return JanitorReport(ran=True, dry_run=False)

    duty = JanitorDuty(ledger, "w1", "a@x", 60.0, slow, say=lambda line: None)
    later = duty.not_before + 1
    first = duty.tick(later)
    assert first is not None and first.is_alive()  # the tick returned at once
    assert duty.tick(later + 1) is None  # one pass of this worker at a time
    release.set()
    first.join(10)
