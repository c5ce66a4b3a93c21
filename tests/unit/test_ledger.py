"""The ledger's contract over fakeredis: transitions, ownership, idempotency, logs, cancel."""

from __future__ import annotations

import json

import fakeredis
import pytest

from tests.factories import make_spec
from worker.clock import FakeClock
from worker.errors import IllegalTransition, JobNotFound, RunNameInUse, StaleOwner
from worker.records.keys import Keys
from worker.records.ledger import ForwardItem, Ledger
from worker.spec import destination, destination_key, encode_spec
from worker.states import JobState as S


@pytest.fixture
def ledger() -> Ledger:
    return Ledger(fakeredis.FakeRedis(), FakeClock(), Keys("t"), log_maxlen=100)


def test_create_records_queued_with_history(ledger: Ledger) -> None:
    spec = make_spec()
    job_id, created = ledger.create(spec)
    assert created and job_id == spec.job_id
    rec = ledger.get(job_id)
    assert rec.state is S.QUEUED and rec.spec == spec and rec.owner == ""
    assert [h.state for h in ledger.history(job_id)] == [S.QUEUED]


def test_same_idempotency_key_yields_one_job(ledger: Ledger) -> None:
    first = make_spec(idempotency_key="k1")
    second = make_spec(idempotency_key="k1")
    assert ledger.create(first) == (first.job_id, True)
    assert ledger.create(second) == (first.job_id, False)
    assert not ledger.exists(second.job_id)
    assert [r.job_id for r in ledger.list_jobs()] == [first.job_id]


def test_transition_follows_table_and_records_reason(ledger: Ledger) -> None:
    job_id, _ = ledger.create(make_spec())
    assert ledger.claim(job_id, "tok", ttl_s=30)
    ledger.transition(job_id, S.ALLOCATING, owner="tok", reason="claimed by w1")
    with pytest.raises(IllegalTransition):
        ledger.transition(job_id, S.SUCCEEDED, owner="tok", reason="skip ahead")
    rec = ledger.get(job_id)
    assert rec.state is S.ALLOCATING and rec.reason == "claimed by w1"
    assert [h.reason for h in ledger.history(job_id)] == ["submitted", "claimed by w1"]


def test_stale_owner_cannot_overwrite(ledger: Ledger) -> None:
    job_id, _ = ledger.create(make_spec())
    assert ledger.claim(job_id, "new-owner", ttl_s=30)
    with pytest.raises(StaleOwner):
        ledger.transition(job_id, S.ALLOCATING, owner="old-owner", reason="late")
    with pytest.raises(StaleOwner):
        ledger.set_fields(job_id, owner="old-owner", endpoint="gpu-1")
    assert ledger.get(job_id).state is S.QUEUED


def test_second_claim_is_refused_while_lock_held(ledger: Ledger) -> None:
    job_id, _ = ledger.create(make_spec())
    assert ledger.claim(job_id, "a", ttl_s=30)
    assert not ledger.claim(job_id, "b", ttl_s=30)
    ledger.release_lock(job_id, "a")
    # The lock is free but the job is owned by a: b must not take it silently.
    assert not ledger.claim(job_id, "b", ttl_s=30)
    assert ledger.get(job_id).owner == "a"


def test_renew_only_by_lock_holder(ledger: Ledger) -> None:
    job_id, _ = ledger.create(make_spec())
    assert ledger.claim(job_id, "a", ttl_s=30)
    assert ledger.renew(job_id, "a", ttl_s=30)
    assert not ledger.renew(job_id, "b", ttl_s=30)


def test_unknown_job_and_unknown_field(ledger: Ledger) -> None:
    with pytest.raises(JobNotFound):
        ledger.get("nope")
    job_id, _ = ledger.create(make_spec())
    with pytest.raises(ValueError):
        ledger.set_fields(job_id, owner="", token="x")


def test_log_stream_reads_in_order_and_caps(ledger: Ledger) -> None:
    job_id, _ = ledger.create(make_spec())
    ids = [ledger.append_log(job_id, f"line {i}") for i in range(5)]
    lines = ledger.read_log(job_id)
    assert [ln.text for ln in lines] == [f"line {i}" for i in range(5)]
    assert [ln.text for ln in ledger.read_log(job_id, after=ids[2])] == ["line 3", "line 4"]
    for i in range(1000):
        ledger.append_log(job_id, f"more {i}")
    assert ledger.r.xlen(ledger.keys.log(job_id)) < 400


def test_cancel_flag(ledger: Ledger) -> None:
    job_id, _ = ledger.create(make_spec())
    assert ledger.cancel_requested(job_id) is None
    ledger.request_cancel(job_id, "by alice")
    assert ledger.cancel_requested(job_id) == "by alice"
    with pytest.raises(JobNotFound):
        ledger.request_cancel("missing", "x")


def test_find_by_prefix(ledger: Ledger) -> None:
    a = make_spec(job_id="aaaa1111bbbb")
    ledger.create(a)
    ledger.create(make_spec(job_id="aaaa2222cccc"))
    assert ledger.find_by_prefix("aaaa1") == a.job_id
    with pytest.raises(JobNotFound):
        ledger.find_by_prefix("aaaa")


def test_cancel_ends_an_unclaimed_job_at_once_and_flags_a_claimed_one(ledger: Ledger) -> None:
    queued, _ = ledger.create(make_spec())
    assert ledger.cancel(queued, "no longer needed") is True
    assert ledger.get(queued).state is S.CANCELLED
    claimed, _ = ledger.create(make_spec())
    assert ledger.claim(claimed, "w1", ttl_s=30)
    assert ledger.cancel(claimed, "stop it") is False
    assert ledger.get(claimed).state is S.QUEUED  # its runner acts on the flag
    assert ledger.cancel_requested(claimed) == "stop it"


def test_janitor_lock_is_released_only_by_its_holder(ledger: Ledger) -> None:
    assert ledger.try_janitor_lock("a", ttl_s=60)
    assert not ledger.try_janitor_lock("b", ttl_s=60)
    ledger.release_janitor_lock("b")
    assert not ledger.try_janitor_lock("b", ttl_s=60)
    ledger.release_janitor_lock("a")
    assert ledger.try_janitor_lock("b", ttl_s=60)


def _items(*spec: tuple[int, str, str]) -> list[ForwardItem]:
    return [ForwardItem(end, kind, payload) for end, kind, payload in spec]


def test_forward_is_exactly_once_whatever_is_sent_again(ledger: Ledger) -> None:
    job_id, _ = ledger.create(make_spec())
    batch = _items((6, "l", "line1"), (12, "l", "line2"), (30, "s", "EXIT=0"))
    assert ledger.forward(job_id, 0, batch) == 30
    # A retried batch (its reply lost) and a re-attach that overlaps: nothing twice.
    assert ledger.forward(job_id, 0, batch) == 30
    assert ledger.forward(job_id, 0, _items((12, "l", "line2"), (18, "l", "line3"))) == 30
    assert ledger.forward(job_id, 0, _items((36, "l", "line4"), (36, "e", "END=36"))) == 36
    assert [ln.text for ln in ledger.read_log(job_id)] == ["line1", "line2", "line4"]
    watch = ledger.read_watch(job_id)
    assert watch["exec_exit"] == "0" and watch["exec_end"] == "36"
    assert watch["log_offset"] == "36"


def test_a_client_of_an_older_segment_changes_nothing(ledger: Ledger) -> None:
    job_id, _ = ledger.create(make_spec())
    assert ledger.claim(job_id, "me", ttl_s=30)
    ledger.forward(job_id, 0, _items((5, "l", "seg0"), (9, "s", "EXIT=1")))
    ledger.start_segment(job_id, "me", 1)
    assert ledger.forward(job_id, 0, _items((20, "l", "late"))) == -1
    watch = ledger.read_watch(job_id)
    assert watch["segment"] == "1" and watch["log_offset"] == "0" and "exec_exit" not in watch
    with pytest.raises(StaleOwner):
        ledger.start_segment(job_id, "someone-else", 2)


def test_renew_takes_back_an_expired_lock_only_while_still_the_owner(ledger: Ledger) -> None:
    job_id, _ = ledger.create(make_spec())
    assert ledger.claim(job_id, "a", ttl_s=30)
    ledger.r.delete(ledger.keys.lock(job_id))  # expired during an outage
    assert ledger.renew(job_id, "a", ttl_s=30)
    ledger.r.delete(ledger.keys.lock(job_id))
    assert ledger.adopt(job_id, "b", ttl_s=30)  # meanwhile someone adopted the job
    assert not ledger.renew(job_id, "a", ttl_s=30)


def test_take_over_needs_the_dead_owner_to_be_the_recorded_one(ledger: Ledger) -> None:
    job_id, _ = ledger.create(make_spec())
    assert ledger.claim(job_id, "dead", ttl_s=30)
    assert not ledger.take_over(job_id, "someone", "me", ttl_s=30)
    assert ledger.take_over(job_id, "dead", "me", ttl_s=30)
    assert ledger.get(job_id).owner == "me"
    assert not ledger.take_over(job_id, "dead", "other", ttl_s=30)


def test_a_transition_applied_once_is_not_applied_twice_on_retry(ledger: Ledger) -> None:
    job_id, _ = ledger.create(make_spec())
    assert ledger.claim(job_id, "tok", ttl_s=30)
    ledger.transition(job_id, S.ALLOCATING, owner="tok", reason="claimed by w1")
    ledger.transition(job_id, S.ALLOCATING, owner="tok", reason="claimed by w1")
    assert [h.state for h in ledger.history(job_id)] == [S.QUEUED, S.ALLOCATING]


# --- one live job per destination (run name) ------------------------------------------------


def test_a_second_live_job_at_the_same_destination_is_refused_until_the_first_ends(
    ledger: Ledger,
) -> None:
    first = make_spec(prefix="runs/mnist")
    ledger.create(first)
    second = make_spec(prefix="runs/mnist")  # same store, same prefix: the same run
    with pytest.raises(RunNameInUse) as refused:
        ledger.create(second)
    assert refused.value.job_id == first.job_id and first.job_id in refused.value.advice()
    assert not ledger.exists(second.job_id)  # bad input changes nothing
    other_place = make_spec(prefix="runs/mnist-other")
    assert ledger.create(other_place)[1]
    assert ledger.create(second, exclusive=False)[1]  # the user allowed it
    ledger.transition(first.job_id, S.CANCELLED, owner="", reason="x")
    third = make_spec(prefix="runs/mnist")
    with pytest.raises(RunNameInUse):  # `second` is live at that destination now
        ledger.create(third)
    ledger.transition(second.job_id, S.CANCELLED, owner="", reason="x")
    assert ledger.create(third)[1]


def test_the_ledger_reads_a_destination_as_the_spec_names_it() -> None:
    spec = make_spec()
    assert destination_key(json.loads(encode_spec(spec))["artifact"]) == destination(spec)


def test_state_of_reads_the_state_alone(ledger: Ledger) -> None:
    job_id, _ = ledger.create(make_spec())
    assert ledger.state_of(job_id) is S.QUEUED
    ledger.r.hset(ledger.keys.job(job_id), "spec", "{not json")  # no spec is decoded
    assert ledger.state_of(job_id) is S.QUEUED
    with pytest.raises(JobNotFound):
        ledger.state_of("feedfacefeedface")
