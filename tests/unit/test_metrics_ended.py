"""What a job's ending adds to the ledger's counters for `colabq metrics` (over fakeredis,
through the ledger's own transition, whichever path ends the job: a runner's, a cancel of a job
no runner holds), reading them back (damaged fields skipped), and the janitor's and notifier's
counters read back."""

from __future__ import annotations

import json

import fakeredis
import pytest

from tests.factories import make_spec
from worker.clock import FakeClock
from worker.colab import rates
from worker.fleet.causes import Cause
from worker.fleet.putback import Attempt, put_back
from worker.metrics.counts import janitor_action, read_counts
from worker.metrics.ended import EndedTotals, read_ended
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.records.unheld import cancel_unheld
from worker.spec import Gpu
from worker.states import JobState as S

T0 = 1_000.0


@pytest.fixture
def ledger() -> Ledger:
    return Ledger(fakeredis.FakeRedis(), FakeClock(T0), Keys("t"), log_maxlen=100)


def totals(ledger: Ledger) -> EndedTotals:
    return read_ended(ledger.r.hgetall(ledger.keys.metrics_ended()))


def advance(ledger: Ledger, seconds: float) -> None:
    ledger.clock.advance(seconds)  # type: ignore[attr-defined]


def claim(ledger: Ledger, job_id: str, owner: str = "w1") -> None:
    assert ledger.claim(job_id, owner, ttl_s=30)
    ledger.transition(job_id, S.ALLOCATING, owner=owner, reason="claimed")


def test_a_runners_ending_counts_its_report_and_its_wait_from_the_claim_that_ran_it(
    ledger: Ledger,
) -> None:
    job_id, _ = ledger.create(make_spec(gpu=Gpu.A100, submitted_by="alice@h1"))
    advance(ledger, 40)
    claim(ledger, job_id)
    # Given back untouched (a host failure), then claimed again 20 s later: that claim ran it.
    put_back(ledger, job_id, "w1", Attempt(T0 + 40, "w1", Cause.HOST, "disk"), "put back")
    advance(ledger, 20)
    claim(ledger, job_id, "w2")
    ledger.set_fields(job_id, owner="w2", endpoint="gpu-1", account="acct@example.com")
    for st in (S.STARTING, S.RUNNING):
        ledger.transition(job_id, st, owner="w2", reason=st.value)
    advance(ledger, 100)
    ledger.transition(job_id, S.RELEASING, owner="w2", reason="done")
    report = {"duration": {"held_s": 99.5}, "compute_units": {"units": 0.3254}}
    ledger.transition(job_id, S.SUCCEEDED, owner="w2", reason="ok",
                      fields={"report": json.dumps(report)})  # fmt: skip
    t = totals(ledger)
    who = ("A100", "acct@example.com", "alice@h1")
    assert t.jobs == {("succeeded", *who): 1}
    assert t.held_s == {who: 99.5} and t.units == {who: 0.3254}  # the report's, as it says them
    wait, run = t.histograms["wait"]["A100"], t.histograms["run"]["A100"]
    assert (wait.count, wait.sum_s, run.count, run.sum_s) == (1, 60.0, 1, 100.0)
    rec = ledger.get(job_id)
    assert wait.sum_s + run.sum_s == rec.updated_at - rec.created_at  # the elapsed `status` shows
    assert dict(wait.cumulative((30, 60, 120)))[60.0] == 1
    assert dict(wait.cumulative((30, 60, 120)))[30.0] == 0


def test_an_ending_without_a_report_counts_the_records_held_time(ledger: Ledger) -> None:
    job_id, _ = ledger.create(make_spec())
    claim(ledger, job_id)
    ledger.set_fields(job_id, owner="w1", endpoint="gpu-1")
    advance(ledger, 90)
    ledger.transition(job_id, S.FAILED_NO_GPU, owner="w1", reason="refused")
    t = totals(ledger)
    who = ("T4", "none", "none")
    assert t.jobs == {("failed_no_gpu", *who): 1}
    assert t.held_s == {who: 90.0}
    assert t.units == {who: pytest.approx(rates.units("T4", 90.0), rel=1e-12)}


def test_a_cancel_of_an_unheld_job_counts_it_once_and_observes_no_wait(ledger: Ledger) -> None:
    job_id, _ = ledger.create(make_spec(submitted_by="bob"))
    assert cancel_unheld(ledger, job_id, "not needed")
    # The same transition again (its reply lost to an outage) changes nothing.
    ledger.transition(job_id, S.CANCELLED, owner=ledger.get(job_id).owner, reason="not needed")
    t = totals(ledger)
    assert t.jobs == {("cancelled", "T4", "none", "bob"): 1}
    assert t.histograms == {"wait": {}, "run": {}}  # never claimed: no wait, no run


def test_labels_read_back_are_made_safe_and_damaged_fields_are_skipped(ledger: Ledger) -> None:
    job_id, _ = ledger.create(make_spec(submitted_by="eve|x y"))
    claim(ledger, job_id)
    ledger.transition(job_id, S.FAILED, owner="w1", reason="boom")
    r, key = ledger.r, ledger.keys.metrics_ended()
    damaged = {"jobs|succeeded|T4": "1", "held|T4|a|b": "lots", "units|T4|a|b": "-1",
               "jobs|bogus|T4|a|b": "1", "wait|T4|250": "2", "run|T4|nan": "1"}  # fmt: skip
    r.hset(key, mapping=damaged)
    t = totals(ledger)
    assert t.jobs == {("failed", "T4", "none", "eve_x_y"): 1}
    assert t.skipped == 5
    # A bucket of a bound no longer in the table still counts, in its place.
    cum = dict(t.histograms["wait"]["T4"].cumulative((1, 300)))
    assert cum[250.0] == 3 and cum[300.0] == 3 and cum[1.0] == 1


@pytest.mark.parametrize(
    ("kind", "did", "action"),
    [
        ("assignment", "did: stop orphan (stopped, verified gone)", "orphan_stopped"),
        ("job", "did: adopt (started adopter)", "adopted"),
        ("job", "did: settle SUCCEEDED", "settled"),
        ("job", "did: send again (sent)", "resent"),
        ("tracker run", "did: finished as FAILED", "ghost_run_closed"),
        ("job", "failed: stop orphan", "failed"),
        ("job", "left alone", None),
        ("assignment", "would: stop orphan", None),
        ("job", "did: drop lease entry", None),
        ("tracker run", "left alone", None),
    ],
)
def test_what_a_janitor_row_counts_as(kind: str, did: str, action: str | None) -> None:
    class Row:
        pass

    row = Row()
    row.kind, row.did = kind, did  # type: ignore[attr-defined]
    assert janitor_action(row) == action  # type: ignore[arg-type]


def test_counters_read_back_bounded_and_checked() -> None:
    raw = {b"a|settled": b"3", b"a|made-up": b"1", b"b|settled": b"x", b"no-sep": b"1"}
    got, skipped = read_counts(raw, ("settled",))
    assert got == {("a", "settled"): 3, ("a", "other"): 1} and skipped == 2
