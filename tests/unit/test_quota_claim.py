"""Quotas in the claim script, on the real Redis (private key prefix): a user's and an account's
GPU quota never let more jobs claim than the limit, the job over it waits (QUEUED, its reason
naming the quota, a backstop retry, its place in the scope's waiting queue) and is made due the
moment a slot frees (an end or a put-back); a unit quota counts the ended jobs' units of the
period plus the running jobs' so far, stops new starts only, and frees at the period's end in
the deployment's time zone."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import redis

from tests.factories import make_spec
from worker.clock import FakeClock
from worker.fleet.causes import Cause
from worker.fleet.putback import Attempt, promote_due, put_back
from worker.flow.slots import BACKSTOP_S
from worker.quota.limits import Scope, clear_quota, set_quota
from worker.records.claim import Claim, claim_and_start
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.states import JobState as S

NOON = datetime(2026, 5, 1, 12, 0, tzinfo=UTC).timestamp()
MIDNIGHT = datetime(2026, 5, 2, 0, 0, tzinfo=UTC).timestamp()
ALICE, TEAM = Scope("user", "alice"), Scope("account", "team@example.com")


@pytest.fixture
def ledger(redis_client: redis.Redis, key_prefix: str) -> Iterator[Ledger]:
    yield Ledger(redis_client, FakeClock(NOON), Keys(key_prefix), log_maxlen=100)
    for key in redis_client.scan_iter(f"{key_prefix}:*"):
        redis_client.delete(key)


def clock(ledger: Ledger) -> FakeClock:
    assert isinstance(ledger.clock, FakeClock)
    return ledger.clock


def set_time(ledger: Ledger, at: float) -> None:
    clock(ledger).advance(at - ledger.clock.time())


def claim(ledger: Ledger, job_id: str, owner: str, account: str = "team@example.com") -> Claim:
    return claim_and_start(
        ledger, job_id, owner, ttl_s=30, worker="w1", owner_host="h:/s", nonce="n",
        wall_deadline_at=NOON + 9999, account=account,
    ).claim  # fmt: skip


def jobs(ledger: Ledger, n: int, user: str = "alice") -> list[str]:
    """`n` jobs of `user`, submitted a millisecond apart (the waiting queues are by submission)."""
    out = []
    for i in range(n):
        out.append(ledger.create(make_spec(run_name=f"r{i}", submitted_by=f"{user}@laptop"))[0])
        clock(ledger).advance(0.001)
    return out


def running(ledger: Ledger, scope: Scope) -> set[str]:
    raw = ledger.r.smembers(ledger.keys.quota_running(scope.kind, scope.name))
    return {m.decode() for m in raw}


def test_a_users_gpu_quota_defers_and_a_freed_slot_makes_the_next_job_due(ledger: Ledger) -> None:
    set_quota(ledger.r, ledger.keys, ALICE, {"gpus": 2}, NOON)
    ids = jobs(ledger, 4)
    assert [claim(ledger, i, f"o{n}") for n, i in enumerate(ids[:2])] == [Claim.CLAIMED] * 2
    assert claim(ledger, ids[2], "o2") is Claim.WAITING
    assert claim(ledger, ids[3], "o3") is Claim.WAITING
    rec = ledger.get(ids[2])
    assert rec.state is S.QUEUED and rec.owner == ""
    assert rec.reason == "waiting: quota alice gpus 2 of 2 running"
    assert float(rec.get("retry_at") or 0) == pytest.approx(ledger.clock.time() + BACKSTOP_S)
    assert running(ledger, ALICE) == set(ids[:2]) and promote_due(ledger, NOON + 1) == []
    # The first job ends: the first waiting one is due at once, and claimed.
    ledger.transition(ids[0], S.CANCELLED, owner="o0", reason="test")
    assert running(ledger, ALICE) == {ids[1]}
    assert promote_due(ledger, ledger.clock.time()) == [ids[2]]
    assert claim(ledger, ids[2], "o2") is Claim.CLAIMED
    assert claim(ledger, ids[3], "o3") is Claim.WAITING
    # A job put back gives its slot back too, and waits its turn after.
    put_back(ledger, ids[1], "o1", Attempt(NOON, "w1", Cause.HOST, "x"), "put back")
    assert promote_due(ledger, ledger.clock.time()) == [ids[3]]
    assert claim(ledger, ids[3], "o3") is Claim.CLAIMED
    assert running(ledger, ALICE) == {ids[2], ids[3]}
    assert claim(ledger, ids[1], "o4") is Claim.WAITING
    # Another user is not held by alice's quota.
    (bobs,) = jobs(ledger, 1, "bob")
    assert claim(ledger, bobs, "o5") is Claim.CLAIMED


def test_an_accounts_gpu_quota_holds_its_workers_only(ledger: Ledger) -> None:
    set_quota(ledger.r, ledger.keys, TEAM, {"gpus": 1}, NOON)
    a, b = jobs(ledger, 1, "alice") + jobs(ledger, 1, "bob")
    assert claim(ledger, a, "o1") is Claim.CLAIMED
    ledger.r.hset(ledger.keys.job(b), "retry_at", repr(NOON - 100))  # an earlier wait's, past
    assert claim(ledger, b, "o2") is Claim.WAITING
    rec = ledger.get(b)
    assert rec.reason == "waiting: quota account team@example.com gpus 1 of 1 running"
    # Its account's workers only: no `retry_at` refuses the others, a backstop in the deferred
    # set sends it again.
    assert rec.get("retry_at") is None
    assert ledger.r.zscore(ledger.keys.deferred(), b) == pytest.approx(
        ledger.clock.time() + BACKSTOP_S
    )
    # A worker of another account may run it.
    assert claim(ledger, b, "o3", account="other@example.com") is Claim.CLAIMED
    assert running(ledger, TEAM) == {a}
    assert running(ledger, Scope("account", "other@example.com")) == {b}


def test_no_quota_no_wait_and_a_cleared_quota_makes_the_waiting_due(ledger: Ledger) -> None:
    ids = jobs(ledger, 3)
    assert claim(ledger, ids[0], "o0") is Claim.CLAIMED
    set_quota(ledger.r, ledger.keys, ALICE, {"gpus": 1}, NOON)
    assert claim(ledger, ids[1], "o1") is Claim.WAITING
    clear_quota(ledger.r, ledger.keys, ALICE, NOON)
    assert promote_due(ledger, ledger.clock.time()) == [ids[1]]
    assert claim(ledger, ids[1], "o1") is Claim.CLAIMED
    assert claim(ledger, ids[2], "o2") is Claim.CLAIMED


def test_a_slot_left_behind_heals_and_a_damaged_limit_keeps_jobs_waiting(ledger: Ledger) -> None:
    set_quota(ledger.r, ledger.keys, ALICE, {"gpus": 1}, NOON)
    ids = jobs(ledger, 2)
    # A slot a user's own cancel could not give back (her ACL rule may not write the set).
    ledger.r.sadd(ledger.keys.quota_running("user", "alice"), ids[0])
    ledger.transition(ids[0], S.CANCELLED, owner="", reason="cancelled while queued")
    ledger.r.sadd(ledger.keys.quota_running("user", "alice"), ids[0])
    assert claim(ledger, ids[1], "o1") is Claim.CLAIMED
    assert running(ledger, ALICE) == {ids[1]}
    (third,) = jobs(ledger, 1)
    ledger.r.hset(ledger.keys.quota_limits(), ALICE.field("units_day"), "lots")
    assert claim(ledger, third, "o3") is Claim.WAITING
    assert ledger.get(third).reason == (
        "waiting: quota alice units_day is damaged (lots): an operator sets it again "
        "(colabq quota set)"
    )


def hold(ledger: Ledger, job_id: str, owner: str) -> None:
    """The job's session assigned: its held-time clock starts (as the runner's `colab new`)."""
    ledger.set_fields(job_id, owner=owner, endpoint=f"ep-{job_id}")


def finish(ledger: Ledger, job_id: str, owner: str) -> None:
    for state in (S.STARTING, S.RUNNING, S.RELEASING, S.SUCCEEDED):
        ledger.transition(job_id, state, owner=owner, reason=f"to {state.value}")


def test_a_unit_quota_stops_new_starts_never_a_running_job(ledger: Ledger) -> None:
    # T4: 1.76 units an hour; 0.01 units is 20.5 s of a T4.
    set_quota(ledger.r, ledger.keys, ALICE, {"units_day": 0.01}, NOON)
    first, second = jobs(ledger, 2)
    assert claim(ledger, first, "o1") is Claim.CLAIMED
    hold(ledger, first, "o1")
    clock(ledger).advance(10)
    assert claim(ledger, second, "o2") is Claim.CLAIMED  # 0.0049 units so far: under
    ledger.transition(second, S.CANCELLED, owner="o2", reason="test")
    (third,) = jobs(ledger, 1)
    clock(ledger).advance(20)  # the running job has held 30 s: 0.0147 units, over the quota
    assert claim(ledger, third, "o3") is Claim.WAITING
    rec = ledger.get(third)
    until = "until 2026-05-02 00:00 UTC"
    assert rec.reason == f"waiting: quota alice units-day 0.0147 of 0.01 used, {until}"
    assert float(rec.get("retry_at") or 0) == MIDNIGHT
    # The running job goes on to succeed; its units now count as ended, the next still waits.
    finish(ledger, first, "o1")
    assert ledger.state_of(first) is S.SUCCEEDED
    day = ledger.keys.quota_spent("day", "2026-05-01")
    assert float(ledger.r.hget(day, "user|alice") or 0) == pytest.approx(1.76 * 30 / 3600, rel=1e-3)
    assert float(ledger.r.hget(day, "account|team@example.com") or 0) > 0
    assert claim(ledger, third, "o3") is Claim.WAITING
    assert promote_due(ledger, MIDNIGHT - 1) == []
    # The next day: due, and claimed.
    set_time(ledger, MIDNIGHT)
    assert promote_due(ledger, MIDNIGHT) == [third]
    assert claim(ledger, third, "o3") is Claim.CLAIMED


@pytest.mark.parametrize(
    ("zone", "end_utc", "end_text"),
    [
        # 23:59:59 in Kolkata (+5:30) is 18:29:59 UTC: its day ends at 18:30 UTC, not midnight.
        ("Asia/Kolkata", datetime(2026, 5, 1, 18, 30, tzinfo=UTC), "2026-05-02 00:00 Asia/Kolkata"),
        ("UTC", datetime(2026, 5, 2, 0, 0, tzinfo=UTC), "2026-05-02 00:00 UTC"),
    ],
)
def test_the_day_ends_at_midnight_in_the_deployments_zone(
    ledger: Ledger, zone: str, end_utc: datetime, end_text: str
) -> None:
    ledger.quota_tz = zone
    end = end_utc.timestamp()
    set_quota(ledger.r, ledger.keys, ALICE, {"units_day": 0.001}, NOON)
    first, second = jobs(ledger, 2)
    assert claim(ledger, first, "o1") is Claim.CLAIMED
    hold(ledger, first, "o1")
    clock(ledger).advance(60)
    finish(ledger, first, "o1")  # 0.029 units, ended today
    set_time(ledger, end - 1)
    assert claim(ledger, second, "o2") is Claim.WAITING
    assert ledger.get(second).reason.endswith(f"used, until {end_text}")
    assert float(ledger.get(second).get("retry_at") or 0) == end
    set_time(ledger, end)
    assert claim(ledger, second, "o2") is Claim.CLAIMED


def test_a_record_its_owner_rewrote_keeps_its_slot_and_charges_no_other_account(
    ledger: Ledger,
) -> None:
    """Under ACLs a user may write her own job's record (not the quota keys, not the leases)."""
    set_quota(ledger.r, ledger.keys, ALICE, {"gpus": 1}, NOON)
    first, second = jobs(ledger, 2)
    assert claim(ledger, first, "o1") is Claim.CLAIMED
    hold(ledger, first, "o1")
    key = ledger.keys.job(first)
    ledger.r.hset(key, mapping={"state": "cancelled", "quota_account": "other@example.com"})
    assert claim(ledger, second, "o2") is Claim.WAITING  # its lease is live: still counted
    assert running(ledger, ALICE) == {first}
    ledger.r.hset(key, "state", "allocating")
    clock(ledger).advance(60)
    ledger.transition(first, S.CANCELLED, owner="o1", reason="test")
    spent = ledger.r.hgetall(ledger.keys.quota_spent("day", "2026-05-01"))
    assert set(spent) == {b"user|alice"}  # not the account it named, which never held it
