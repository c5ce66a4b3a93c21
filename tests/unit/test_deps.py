"""Dependencies on the real Redis (private key prefix): a job after another is refused by the
claim while it waits (deferred, its reason saying for what), made due the moment its dependency
ends, then sent when the dependency ended as asked or ended CANCELLED with the reason when not;
`@N` names an earlier job of the same batch (a job file's steps)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.factories import make_spec
from tests.unit.test_resubmit import path_to
from worker.clock import FakeClock
from worker.errors import UserInputError
from worker.fleet.putback import promote_due
from worker.flow.deps import parse_after, release_or_settle
from worker.records.claim import Claim, claim_and_start
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.states import JobState as S


@pytest.fixture
def ledger(redis_client: redis.Redis, key_prefix: str) -> Iterator[Ledger]:
    yield Ledger(redis_client, FakeClock(1000.0), Keys(key_prefix), log_maxlen=100)
    for key in redis_client.scan_iter(f"{key_prefix}:*"):
        redis_client.delete(key)


def claim(ledger: Ledger, job_id: str, owner: str) -> Claim:
    return claim_and_start(
        ledger, job_id, owner, ttl_s=30, worker="w1", owner_host="h:/s", nonce="n",
        wall_deadline_at=9999.0,
    ).claim  # fmt: skip


def pipeline(ledger: Ledger, cond: str = "ok") -> tuple[str, str]:
    specs = [make_spec(run_name="train"), make_spec(run_name="eval")]
    (train, _), (ev, _) = ledger.create_many(specs, after=["", f"@0:{cond}"])
    return train, ev


def end(ledger: Ledger, job_id: str, state: S) -> None:
    assert claim(ledger, job_id, "o-train") is Claim.CLAIMED
    steps = path_to(state)
    for step in steps[1:] if steps[0] is S.ALLOCATING else [state]:  # claimed: ALLOCATING
        ledger.transition(job_id, step, owner="o-train", reason=f"to {step.value}")


def test_eval_waits_for_train_then_runs(ledger: Ledger) -> None:
    train, ev = pipeline(ledger)
    assert ledger.get(ev).get("after") == f"{train}:ok"
    assert claim(ledger, ev, "o-eval") is Claim.WAITING
    assert ledger.get(ev).reason == f"waiting for {train} (QUEUED) to succeed"
    end(ledger, train, S.SUCCEEDED)
    assert promote_due(ledger, 1000.0) == [ev]  # made due by the end itself
    assert release_or_settle(ledger, ev, 1000.0)
    assert claim(ledger, ev, "o-eval") is Claim.CLAIMED


def test_eval_ends_cancelled_when_train_fails(ledger: Ledger) -> None:
    train, ev = pipeline(ledger)
    assert claim(ledger, ev, "o-eval") is Claim.WAITING
    end(ledger, train, S.FAILED)
    assert promote_due(ledger, 1000.0) == [ev]
    assert not release_or_settle(ledger, ev, 1000.0)
    rec = ledger.get(ev)
    assert rec.state is S.CANCELLED
    assert rec.reason == f"dependency {train} ended FAILED (needed SUCCEEDED)"


def test_notok_and_a_running_dependency(ledger: Ledger) -> None:
    train, ev = pipeline(ledger, "notok")
    assert claim(ledger, train, "o-train") is Claim.CLAIMED
    assert not release_or_settle(ledger, ev, 1000.0)  # still waiting: deferred again
    assert ledger.get(ev).reason == f"waiting for {train} (ALLOCATING) to end without success"
    assert ledger.get(ev).state is S.QUEUED
    ledger.transition(train, S.FAILED, owner="o-train", reason="boom")
    assert release_or_settle(ledger, ev, 1000.0)


def test_bad_after_is_one_line() -> None:
    with pytest.raises(UserInputError, match="expected JOB"):
        parse_after(["abc:maybe"])
