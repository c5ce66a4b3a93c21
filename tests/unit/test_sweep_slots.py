"""A sweep's parallel cap in the claim script, on the real Redis (private key prefix): never more
than N points claimed at once; a point over the cap is deferred (QUEUED, its reason says why, a
backstop retry in the deferred set) and made due at once when a point ends or is put back; a
point of a sweep without a cap, or a job of no sweep, is claimed as before."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
import redis

from tests.factories import make_spec
from worker.clock import FakeClock
from worker.fleet.causes import Cause
from worker.fleet.putback import Attempt, promote_due, put_back
from worker.flow.slots import BACKSTOP_S
from worker.flow.sweeps import SweepTag, new_sweep_id, sweep_running
from worker.records.claim import Claim, claim_and_start
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.states import JobState as S


@pytest.fixture
def ledger(redis_client: redis.Redis, key_prefix: str) -> Iterator[Ledger]:
    yield Ledger(redis_client, FakeClock(1000.0), Keys(key_prefix), log_maxlen=100)
    for key in redis_client.scan_iter(f"{key_prefix}:*"):
        redis_client.delete(key)


def claim(ledger: Ledger, job_id: str, owner: str = "o1") -> Claim:
    return claim_and_start(
        ledger, job_id, owner, ttl_s=30, worker="w1", owner_host="h:/s", nonce="n",
        wall_deadline_at=9999.0,
    ).claim  # fmt: skip


def sweep(ledger: Ledger, n: int, cap: int) -> tuple[str, list[str]]:
    sid = new_sweep_id(None)
    specs = [make_spec(run_name=f"p{i}") for i in range(n)]
    return sid, [i for i, _ in ledger.create_many(specs, sweep=SweepTag(sid, cap))]


def test_the_cap_defers_and_a_freed_slot_makes_the_next_point_due(ledger: Ledger) -> None:
    sid, ids = sweep(ledger, 4, 2)
    running = sweep_running(ledger.keys, sid)
    assert [claim(ledger, i, f"o{n}") for n, i in enumerate(ids[:2])] == [Claim.CLAIMED] * 2
    assert claim(ledger, ids[2]) is Claim.WAITING and claim(ledger, ids[3]) is Claim.WAITING
    rec = ledger.get(ids[2])
    assert rec.state is S.QUEUED and rec.owner == ""
    assert rec.reason == f"waiting: sweep {sid} has 2 of 2 running"
    assert float(rec.get("retry_at") or 0) == 1000.0 + BACKSTOP_S
    assert ledger.r.scard(running) == 2 and promote_due(ledger, 1001.0) == []
    # The first point ends: the next waiting point is due now, and claimed.
    ledger.transition(ids[0], S.CANCELLED, owner="o0", reason="test")
    assert ledger.r.scard(running) == 1
    assert promote_due(ledger, 1000.0) == [ids[2]]
    assert claim(ledger, ids[2], "o2") is Claim.CLAIMED and ledger.r.scard(running) == 2
    assert claim(ledger, ids[3]) is Claim.WAITING
    # A point put back gives its slot back too.
    put_back(ledger, ids[1], "o1", Attempt(1000.0, "w1", Cause.HOST, "x"), "put back")
    assert promote_due(ledger, 1000.0) == [ids[3]]
    assert claim(ledger, ids[3], "o3") is Claim.CLAIMED
    assert {m.decode() for m in ledger.r.smembers(running)} == {ids[2], ids[3]}
    # The point put back waits for a slot in its turn.
    assert claim(ledger, ids[1], "o4") is Claim.WAITING


def test_no_cap_no_wait(ledger: Ledger) -> None:
    _, ids = sweep(ledger, 3, 0)
    assert [claim(ledger, i, f"o{n}") for n, i in enumerate(ids)] == [Claim.CLAIMED] * 3
    alone, _ = ledger.create(make_spec(run_name="alone"))
    assert claim(ledger, alone) is Claim.CLAIMED


def test_cancelling_a_waiting_point_leaves_the_queue(ledger: Ledger) -> None:
    _, ids = sweep(ledger, 3, 1)
    assert claim(ledger, ids[0], "o0") is Claim.CLAIMED
    assert claim(ledger, ids[1]) is Claim.WAITING and claim(ledger, ids[2]) is Claim.WAITING
    assert ledger.cancel(ids[1], "no longer needed")
    ledger.transition(ids[0], S.CANCELLED, owner="o0", reason="test")
    assert promote_due(ledger, 1000.0) == [ids[2]]  # not the cancelled one


def test_a_forged_sweep_field_takes_no_slot_of_another_users_sweep(ledger: Ledger) -> None:
    sid = new_sweep_id("bob")
    specs = [make_spec(job_id=f"{secrets.token_hex(8)}.bob", submitted_by="bob", run_name=f"p{i}")
             for i in range(2)]  # fmt: skip
    ids = [i for i, _ in ledger.create_many(specs, sweep=SweepTag(sid, 2))]
    running = sweep_running(ledger.keys, sid)
    assert claim(ledger, ids[0], "o0") is Claim.CLAIMED
    # Eve's own record names bob's sweep (or a sweep id that is none): counted against nothing.
    for forged in (sid, "sw../../x", f"{sid}x"):
        eve, _ = ledger.create(make_spec(job_id=f"{secrets.token_hex(8)}.eve", submitted_by="eve"))
        ledger.r.hset(ledger.keys.job(eve), "sweep", forged)
        assert claim(ledger, eve, f"eve-{forged}") is Claim.CLAIMED
        assert {m.decode() for m in ledger.r.smembers(running)} == {ids[0]}
    assert claim(ledger, ids[1], "o1") is Claim.CLAIMED  # bob's second slot was his to take
