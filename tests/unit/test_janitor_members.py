"""The janitor when fleet members die: a lost host noticed after a few missed beats (thresholds
derived from the beat intervals, run with a fake clock), a retained VM whose owner died adopted,
a QUEUED job whose claimant died sent again, and left-alone rows collapsed."""

from __future__ import annotations

import dataclasses

import pytest

from tests.factories import SESSION, make_spec
from tests.unit.test_janitor import (
    NOW,
    Calls,
    _owner_dies,
    _running_job,
    deps_for,
    ledger,
    sess,
    view,
)  # fmt: skip
from worker.janitor.beats import FLOOR_S, host_lost_noticed_within_s, watchdog_lost_after_s
from worker.janitor.classify import Do, find_account_findings, find_job_findings
from worker.janitor.run import JanitorReport, Row, collapse_left_alone, janitor_pass
from worker.janitor.snapshot import Snapshot
from worker.records.ledger import Ledger
from worker.states import JobState as S

__all__ = ["ledger"]  # the fixture, imported

# --- thresholds (pure) ----------------------------------------------------------------------

THRESHOLDS = [
    ("default 15 s poll: 3 polls + 5 s", 15.0, 50.0),
    ("a fast poll: the floor", 0.5, FLOOR_S),
    ("a slow poll scales with it", 60.0, 185.0),
]


@pytest.mark.parametrize(("case", "poll_s", "expect"), THRESHOLDS, ids=[c[0] for c in THRESHOLDS])
def test_watchdog_lost_after(case: str, poll_s: float, expect: float) -> None:
    assert watchdog_lost_after_s(poll_s) == expect


def test_default_deployment_notices_a_lost_host_within_two_minutes_not_minutes_more() -> None:
    # Lease 30 s, watchdog poll 15 s, a pass every 60 s: 50 s of missed beats, then one pass.
    assert host_lost_noticed_within_s(
        lease_ttl_s=30.0, watchdog_poll_s=15.0, janitor_interval_s=60.0
    ) == 110.0  # fmt: skip
    # The emulated fleet of the integration tests (lease 3 s, poll 0.5 s): the floor.
    assert host_lost_noticed_within_s(
        lease_ttl_s=3.0, watchdog_poll_s=0.5, janitor_interval_s=1.0
    ) == 11.0  # fmt: skip


# --- a pass with a fake clock: must adopt beside must not ------------------------------------

BEATS = [
    # (case, state the owner died in, watchdog poll, seconds since its watchdog's last beat,
    #  adopted?)
    ("running, 3 polls missed: not yet (margin)", S.RUNNING, 15.0, 45.0, False),
    ("running, 3 polls + margin missed: adopt", S.RUNNING, 15.0, 51.0, True),
    ("running, the old fixed 90 s: long adopted", S.RUNNING, 15.0, 89.0, True),
    ("starting, beat fresh: its watchdog keeps the caps", S.STARTING, 15.0, 10.0, False),
    ("starting, beats missed: adopt", S.STARTING, 15.0, 51.0, True),
    ("allocating with an endpoint, beats missed: adopt", S.ALLOCATING, 15.0, 51.0, True),
    ("persisting, beats missed: adopt", S.PERSISTING, 15.0, 51.0, True),
    ("releasing, beats missed: adopt", S.RELEASING, 15.0, 51.0, True),
    ("fast poll, under the floor: not yet", S.RUNNING, 0.5, 9.0, False),
    ("fast poll, past the floor: adopt", S.RUNNING, 0.5, 10.5, True),
    ("watchdog never beat: adopt", S.RUNNING, 15.0, None, True),
]

PATH = {
    S.ALLOCATING: [],
    S.STARTING: [S.STARTING],
    S.RUNNING: [S.STARTING, S.RUNNING],
    S.PERSISTING: [S.STARTING, S.RUNNING, S.PERSISTING],
    S.RELEASING: [S.STARTING, S.RUNNING, S.RELEASING],
}


def _job_in(ledger: Ledger, state: S) -> str:
    job_id, _ = ledger.create(make_spec())
    assert ledger.claim(job_id, "w1", ttl_s=30)
    ledger.transition(job_id, S.ALLOCATING, owner="w1", reason="claimed")
    ledger.set_fields(job_id, owner="w1", endpoint="gpu-1", session=SESSION)
    for st in PATH[state]:
        ledger.transition(job_id, st, owner="w1", reason=f"to {st.value}")
    return job_id


@pytest.mark.parametrize(("case", "state", "poll_s", "age_s", "adopt"), BEATS,
                         ids=[c[0] for c in BEATS])  # fmt: skip
def test_a_lost_host_is_adopted_after_missed_beats_in_every_phase(
    ledger: Ledger, case: str, state: S, poll_s: float, age_s: float | None, adopt: bool
) -> None:
    job_id = _job_in(ledger, state)
    clock = ledger.clock
    if age_s is not None:
        ledger.record_watch(job_id, {"heartbeat_at": repr(clock.time())})
    # The host goes: its watchdog's silence lasts `age_s`, and its lease has expired by then.
    ledger.r.delete(ledger.keys.lock(job_id))
    clock.advance(age_s if age_s is not None else 60.0)  # type: ignore[attr-defined]
    ledger.r.zadd(ledger.keys.leases(), {job_id: clock.time() - 1})
    calls = Calls()
    deps = dataclasses.replace(
        deps_for(ledger, calls), watchdog_stale_s=watchdog_lost_after_s(poll_s)
    )
    report = janitor_pass(deps, dry_run=False)
    [row] = [r for r in report.rows if r.subject == job_id]
    assert (f"adopt {job_id}" in calls.remote) is adopt, row
    assert row.did.startswith("did: adopt") if adopt else row.did == "left alone"
    assert ledger.get(job_id).state is state  # the adopter, not the pass, finishes it


# --- a retained VM whose owner is gone ------------------------------------------------------

RETAINED = [
    ("retained, owner gone, watchdog alive: adopt (it recovers, then releases)",
     view(state=S.RETAINED, watchdog_beat_at=NOW - 1), Do.ADOPT),
    ("retained, owner gone, watchdog gone: adopt", view(state=S.RETAINED), Do.ADOPT),
    ("retained, owner live: nothing", view(state=S.RETAINED, lock_held=True), None),
    ("retained, session verified gone: settle", view(state=S.RETAINED, gone_verified=True),
     Do.SETTLE),
]  # fmt: skip


@pytest.mark.parametrize(("case", "v", "expect"), RETAINED, ids=[c[0] for c in RETAINED])
def test_retained_findings(case: str, v: object, expect: Do | None) -> None:
    snap = Snapshot(NOW, (v,), ())  # type: ignore[arg-type]
    found = find_job_findings(snap, watchdog_stale_s=50, stranded_grace_s=600, queued_ids=set())
    assert [f.do for f in found] == ([expect] if expect else [])


def test_a_retained_vm_whose_recovery_keeps_failing_says_so_on_every_pass() -> None:
    why = "final upload failed; recovering the results failed 3 time(s) (...); the VM is kept"
    job = view(state=S.RETAINED, lock_held=True, reason=why)
    for _ in range(2):
        [f] = find_account_findings(
            [sess("gpu-1")], {"gpu-1": "j1"}, {"j1": job}, {"gpu-1": NOW - 999},
            now=NOW, grace_s=90, watchdog_stale_s=50,
        )  # fmt: skip
        assert f.do is Do.LEAVE and "live" in f.why and "failed 3 time(s)" in f.why


def test_pass_adopts_a_retained_job_whose_owner_died_though_its_watchdog_beats(
    ledger: Ledger,
) -> None:
    job_id = _running_job(ledger)
    ledger.transition(job_id, S.RETAINED, owner="w1", reason="final upload failed")
    _owner_dies(ledger, job_id)
    ledger.record_watch(job_id, {"heartbeat_at": repr(ledger.clock.time())})  # beats on
    calls = Calls()
    report = janitor_pass(deps_for(ledger, calls), dry_run=False)
    assert [r.subject for r in report.did("adopt")] == [job_id]
    assert "only copy" in report.did("adopt")[0].why
    assert ledger.get(job_id).state is S.RETAINED


# --- a QUEUED job whose claimant is gone ----------------------------------------------------

QUEUED = [
    ("claimant gone (no lock): clear and send again", view(state=S.QUEUED, owner="w9"),
     Do.UNCLAIM),
    ("claimant gone, however young: in beats, not after the stranded grace",
     view(state=S.QUEUED, owner="w9", created_at=NOW - 1), Do.UNCLAIM),
    ("claimant live: nothing", view(state=S.QUEUED, owner="w9", lock_held=True), None),
    ("never claimed, young: nothing", view(state=S.QUEUED, owner="", created_at=NOW - 1), None),
]  # fmt: skip


@pytest.mark.parametrize(("case", "v", "expect"), QUEUED, ids=[c[0] for c in QUEUED])
def test_queued_findings(case: str, v: object, expect: Do | None) -> None:
    snap = Snapshot(NOW, (v,), ())  # type: ignore[arg-type]
    found = find_job_findings(snap, watchdog_stale_s=50, stranded_grace_s=600, queued_ids=set())
    assert [f.do for f in found] == ([expect] if expect else [])


def _dead_claim(ledger: Ledger) -> str:
    job_id, _ = ledger.create(make_spec())
    assert ledger.claim(job_id, "w9", ttl_s=30)
    ledger.release_lock(job_id, "w9")  # the claimant died before ALLOCATING (or never ran)
    return job_id


def test_pass_clears_a_dead_claim_and_sends_the_job_again(ledger: Ledger) -> None:
    job_id = _dead_claim(ledger)
    calls = Calls()
    report = janitor_pass(deps_for(ledger, calls), dry_run=False)
    [row] = [r for r in report.rows if r.subject == job_id]
    assert row.did.startswith("did: clear dead claim; send again"), row
    assert calls.remote.count(f"resend {job_id}") == 1
    rec = ledger.get(job_id)
    assert rec.owner == "" and rec.state is S.QUEUED and rec.get("resent_at")
    assert ledger.claim(job_id, "w2", ttl_s=30)  # a worker can take it now
    janitor_pass(deps_for(ledger, calls), dry_run=False)
    assert calls.remote.count(f"resend {job_id}") == 1  # its new claimant holds it


def test_pass_leaves_a_claim_whose_lock_came_back(ledger: Ledger) -> None:
    job_id = _dead_claim(ledger)
    calls = Calls()

    def queues_read_meanwhile_the_claimant_is_back() -> set[str]:
        # Between the pass's read and its act, the claimant renews: its lock is back.
        ledger.r.set(ledger.keys.lock(job_id), "w9")
        return set()

    deps = dataclasses.replace(
        deps_for(ledger, calls), queued_ids=queues_read_meanwhile_the_claimant_is_back
    )
    report = janitor_pass(deps, dry_run=False)
    [row] = [r for r in report.rows if r.subject == job_id]
    assert row.did == "left alone" and "holds its lock again" in row.why, row
    assert ledger.get(job_id).owner == "w9" and f"resend {job_id}" not in calls.remote


def test_a_dead_claim_whose_message_waits_is_cleared_not_sent_again(ledger: Ledger) -> None:
    job_id = _dead_claim(ledger)
    calls = Calls()
    deps = dataclasses.replace(deps_for(ledger, calls), queued_ids=lambda: {job_id})
    report = janitor_pass(deps, dry_run=False)
    [row] = [r for r in report.rows if r.subject == job_id]
    assert row.did == "did: clear dead claim (its message waits)", row
    assert f"resend {job_id}" not in calls.remote and ledger.get(job_id).owner == ""


def test_dry_run_clears_nothing(ledger: Ledger) -> None:
    job_id = _dead_claim(ledger)
    report = janitor_pass(deps_for(ledger, Calls()), dry_run=True)
    assert [r.did for r in report.rows if r.subject == job_id] == ["would: clear dead claim"]
    assert ledger.get(job_id).owner == "w9"


# --- the report -----------------------------------------------------------------------------


def test_repeated_left_alone_rows_collapse_into_one() -> None:
    why = "no wandb settings on this host (COLABQ_WANDB_API_KEY_FILE): not checked"
    rows = [Row("tracker run", f"wandb:e/p/{i}", "job x SUCCEEDED", "left alone", why)
            for i in range(5)]  # fmt: skip
    rows.insert(2, Row("tracker run", "mlflow:1", "job y FAILED", "did: finish FAILED", "ghost"))
    rows.append(Row("tracker run", "wandb:e/p/z", "job z", "left alone", "closed"))
    out = collapse_left_alone(rows)
    assert [r.subject for r in out] == ["5 tracker runs", "mlflow:1", "wandb:e/p/z"]
    assert out[0].why == why and out[0].seen.endswith("and 2 more")
    assert collapse_left_alone(rows[:1]) == rows[:1]  # one row stays itself
    lines = JanitorReport(True, False, tuple(out)).lines()
    assert len(lines) == 4
