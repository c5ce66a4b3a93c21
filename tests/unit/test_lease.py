"""The lease's fence: an owner acts only while its lease is good; through an outage it waits
for a renewal, and it stops for good once another owner holds the job."""

from __future__ import annotations

import threading
import time

import fakeredis
import pytest
import redis

from tests.factories import make_spec
from worker.clock import FakeClock
from worker.records.keys import Keys
from worker.records.lease import Heartbeat, LeaseLost
from worker.records.ledger import Ledger
from worker.records.ownership import Renewal
from worker.states import JobState as S


class FlakyLedger(Ledger):
    """A ledger whose renewals fail while `down` is set (Redis unreachable)."""

    down = threading.Event()

    def renew(self, job_id: str, owner: str, ttl_s: float) -> Renewal:
        if self.down.is_set():
            raise redis.ConnectionError("Connection refused")
        return super().renew(job_id, owner, ttl_s)


@pytest.fixture
def ledger() -> FlakyLedger:
    FlakyLedger.down = threading.Event()
    return FlakyLedger(fakeredis.FakeRedis(), FakeClock(), Keys("t"), log_maxlen=100)


def test_fence_passes_a_fresh_lease(ledger: FlakyLedger) -> None:
    job_id, _ = ledger.create(make_spec())
    assert ledger.claim(job_id, "me", ttl_s=30)
    Heartbeat(ledger, job_id, "me", interval_s=0.05, ttl_s=30).fence(wait_s=0)


def test_fence_waits_out_an_outage_then_passes(ledger: FlakyLedger) -> None:
    job_id, _ = ledger.create(make_spec())
    assert ledger.claim(job_id, "me", ttl_s=0.2)
    ledger.down.set()
    with Heartbeat(ledger, job_id, "me", interval_s=0.05, ttl_s=0.2) as hb:
        threading.Timer(0.5, ledger.down.clear).start()  # Redis is back after 0.5 s
        hb.fence(wait_s=5)
        assert hb.valid()


def test_fence_refuses_once_redis_stays_away_past_the_wait(ledger: FlakyLedger) -> None:
    job_id, _ = ledger.create(make_spec())
    assert ledger.claim(job_id, "me", ttl_s=0.1)
    ledger.down.set()
    with (
        Heartbeat(ledger, job_id, "me", interval_s=0.05, ttl_s=0.1) as hb,
        pytest.raises(LeaseLost),
    ):
        time.sleep(0.15)  # the lease runs out: no renewal got through
        hb.fence(wait_s=0.3)


def test_fence_refuses_at_once_when_another_owner_holds_the_job(ledger: FlakyLedger) -> None:
    job_id, _ = ledger.create(make_spec())
    assert ledger.claim(job_id, "me", ttl_s=30)
    ledger.r.delete(ledger.keys.lock(job_id))
    assert ledger.adopt(job_id, "other", ttl_s=30)
    with Heartbeat(ledger, job_id, "me", interval_s=0.05, ttl_s=30) as hb:
        hb.lost.wait(2)
        with pytest.raises(LeaseLost, match="another runner"):
            hb.fence(wait_s=5)


def test_a_record_redis_lost_is_written_again_by_its_live_owner(ledger: FlakyLedger) -> None:
    spec = make_spec()
    ledger.create(spec)
    assert ledger.claim(spec.job_id, "me", ttl_s=30)
    ledger.r.flushall()  # Redis restarted without persistence
    assert ledger.renew(spec.job_id, "me", ttl_s=30) is Renewal.RECORD_GONE
    beat = Heartbeat(
        ledger, spec.job_id, "me", interval_s=0.05, ttl_s=30,
        restore=lambda: ledger.restore(spec, "me", S.RUNNING, 30, session="colabq-x"),
    )  # fmt: skip
    beat.renew_once()
    assert not beat.lost.is_set()
    rec = ledger.get(spec.job_id)
    assert rec.state is S.RUNNING and rec.owner == "me" and rec.get("session") == "colabq-x"
    assert ledger.renew(spec.job_id, "me", ttl_s=30) is Renewal.RENEWED
    assert ledger.r.sismember(ledger.keys.active(), spec.job_id)
    assert ledger.find_by_prefix(spec.job_id[:6]) == spec.job_id
    assert not ledger.restore(spec, "me", S.RUNNING, 30)  # a record exists: nothing written
