"""The claim and the first state change in one script (P4): a claimed job is ALLOCATING under
its new owner with its lease, history entry and a fresh console offset; every refusal writes
nothing (invariant 6: at most one owner, whatever redelivery or double messages occur)."""

from __future__ import annotations

import fakeredis
import pytest

from tests.factories import make_spec
from worker.clock import FakeClock
from worker.fleet import health
from worker.records.claim import Claim, claim_and_start
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.states import JobState as S


@pytest.fixture
def ledger() -> Ledger:
    return Ledger(fakeredis.FakeRedis(), FakeClock(1000.0), Keys("t"), log_maxlen=1000)


def _claim(ledger: Ledger, job_id: str, owner: str = "o1", worker: str = "w1") -> Claim:
    return claim_and_start(
        ledger, job_id, owner, ttl_s=30, worker=worker, owner_host="h:/s", nonce="n1",
        wall_deadline_at=4600.0,
    ).claim  # fmt: skip


def _snapshot(ledger: Ledger, job_id: str) -> dict[str, object]:
    k = ledger.keys
    return {
        "job": ledger.r.hgetall(k.job(job_id)), "lock": ledger.r.get(k.lock(job_id)),
        "history": ledger.r.lrange(k.history(job_id), 0, -1),
        "leases": ledger.r.zrange(k.leases(), 0, -1),
    }  # fmt: skip


def test_a_claim_starts_the_job_under_its_owner(ledger: Ledger) -> None:
    spec = make_spec()
    ledger.create(spec)
    ledger.r.hset(ledger.keys.watch(spec.job_id), mapping={"exec_exit": "0", "log_offset": "99"})
    assert _claim(ledger, spec.job_id) is Claim.CLAIMED
    rec = ledger.get(spec.job_id)
    assert (rec.state, rec.owner, rec.reason) == (S.ALLOCATING, "o1", "claimed by w1")
    assert (rec.get("worker"), rec.get("owner_host"), rec.get("nonce")) == ("w1", "h:/s", "n1")
    assert rec.get("wall_deadline_at") == "4600.0" and rec.get("segment") == "0"
    assert ledger.r.get(ledger.keys.lock(spec.job_id)) == b"o1"
    assert ledger.r.zscore(ledger.keys.leases(), spec.job_id) == 1030.0
    assert ledger.read_watch(spec.job_id) == {"segment": "0", "log_offset": "0"}
    assert [h.state for h in ledger.history(spec.job_id)] == [S.QUEUED, S.ALLOCATING]


@pytest.mark.parametrize(
    ("given", "expect"),
    [
        ("claimed by another", Claim.NOT_QUEUED),  # it is ALLOCATING under its owner
        ("locked by another", Claim.OWNED),
        ("cancelled", Claim.NOT_QUEUED),
        ("waiting for a GPU", Claim.WAITING),
        ("this worker drained", Claim.DRAINED),
    ],
)
def test_a_refused_claim_writes_nothing(ledger: Ledger, given: str, expect: Claim) -> None:
    spec = make_spec()
    ledger.create(spec)
    if given == "claimed by another":
        assert _claim(ledger, spec.job_id, owner="o0", worker="w0") is Claim.CLAIMED
    elif given == "locked by another":
        ledger.r.set(ledger.keys.lock(spec.job_id), "o0")
    elif given == "cancelled":
        assert ledger.cancel(spec.job_id, "no")
    elif given == "waiting for a GPU":
        ledger.r.hset(ledger.keys.job(spec.job_id), "retry_at", "2000.0")
    else:
        health.note_failure(ledger.r, ledger.keys, "w1", "401", 0.0, probe_s=5, probe_max_s=60)
    before = _snapshot(ledger, spec.job_id)
    assert _claim(ledger, spec.job_id) is expect
    assert _snapshot(ledger, spec.job_id) == before


def test_a_missing_job_is_said(ledger: Ledger) -> None:
    assert _claim(ledger, "0123456789abcdef") is Claim.MISSING
