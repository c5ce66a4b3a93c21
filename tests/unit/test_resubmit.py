"""The duplicate guard holds against live and succeeded jobs only (invariant 8 for those): the
same idempotency key submitted again after its job failed, timed out, was cancelled or lost
records a new job, the key then names it, and the two are linked. Over fakeredis, through the
ledger's one creation script."""

from __future__ import annotations

from collections import deque

import fakeredis
import pytest

from tests.factories import make_spec
from worker.clock import FakeClock
from worker.records.create import RESUBMITTABLE
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.states import ALLOWED, TERMINAL, JobState

OWNER = "owner-token"


@pytest.fixture
def ledger() -> Ledger:
    return Ledger(fakeredis.FakeRedis(), FakeClock(), Keys("t"), log_maxlen=100)


def path_to(target: JobState) -> list[JobState]:
    """The shortest walk from QUEUED to `target` along `states.ALLOWED`."""
    seen = {JobState.QUEUED: [JobState.QUEUED]}
    todo = deque([JobState.QUEUED])
    while todo:
        state = todo.popleft()
        for nxt in sorted(ALLOWED[state]):
            if nxt not in seen:
                seen[nxt] = [*seen[state], nxt]
                todo.append(nxt)
    return seen[target][1:]


def job_in(ledger: Ledger, state: JobState, key: str = "k1") -> str:
    job_id, created = ledger.create(make_spec(idempotency_key=key, prefix="runs/same"))
    assert created and ledger.claim(job_id, OWNER, ttl_s=60)
    for step in path_to(state):
        ledger.transition(job_id, step, owner=OWNER, reason=f"to {step.value}")
    return job_id


def test_the_resubmittable_states_are_every_end_but_success() -> None:
    assert TERMINAL - {JobState.SUCCEEDED} == RESUBMITTABLE
    assert {JobState.FAILED, JobState.TIMED_OUT, JobState.CANCELLED, JobState.FAILED_LOST,
            JobState.VM_LOST, JobState.FAILED_NO_GPU} <= RESUBMITTABLE  # fmt: skip


@pytest.mark.parametrize("state", sorted(RESUBMITTABLE))
def test_a_job_that_ended_without_success_can_be_submitted_again(
    ledger: Ledger, state: JobState
) -> None:
    old = job_in(ledger, state)
    again = make_spec(idempotency_key="k1", prefix="runs/same")
    new, created = ledger.create(again)
    assert created and new == again.job_id != old
    assert ledger.get(new).state is JobState.QUEUED
    assert ledger.get(new).get("retry_of") == old and ledger.get(old).get("retried_as") == new
    # The key now names the new job: a third submission while it is live yields it.
    third, created = ledger.create(make_spec(idempotency_key="k1", prefix="runs/same"))
    assert (third, created) == (new, False)


LIVE = sorted(set(JobState) - TERMINAL - {JobState.QUEUED})


@pytest.mark.parametrize("state", [JobState.QUEUED, *LIVE, JobState.SUCCEEDED])
def test_a_live_or_succeeded_job_keeps_its_key(ledger: Ledger, state: JobState) -> None:
    if state is JobState.QUEUED:
        old, _ = ledger.create(make_spec(idempotency_key="k1", prefix="runs/same"))
    else:
        old = job_in(ledger, state)
    again = make_spec(idempotency_key="k1", prefix="runs/same")
    assert ledger.create(again) == (old, False)
    assert not ledger.exists(again.job_id)
    assert ledger.get(old).get("retried_as") is None


def test_a_key_whose_record_expired_is_free_without_a_link(ledger: Ledger) -> None:
    old = job_in(ledger, JobState.FAILED)
    ledger.r.delete(ledger.keys.job(old))  # retention expired the record, not the key
    new, created = ledger.create(make_spec(idempotency_key="k1", prefix="runs/same"))
    assert created and new != old and ledger.get(new).get("retry_of") is None


def test_a_sweep_resubmits_only_the_points_that_failed(ledger: Ledger) -> None:
    failed = job_in(ledger, JobState.FAILED, key="p1")
    done = job_in(ledger, JobState.SUCCEEDED, key="p2")
    specs = [make_spec(idempotency_key=k) for k in ("p1", "p2")]
    (new1, created1), (same2, created2) = ledger.create_many(specs)
    assert created1 and new1 != failed and ledger.get(new1).get("retry_of") == failed
    assert (same2, created2) == (done, False)
