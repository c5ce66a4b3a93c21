"""Redis goes away for longer than the lease's TTL and every retry budget while a job runs (issue
17: "Redis down 3 minutes", here scaled down: a 2 s retry budget, a 3 s lease, a 20 s outage).
The job runs on on its VM, the watchdog keeps it (the VM says it runs), the runner waits for
Redis instead of giving the job up, takes its lease back when Redis returns, attaches again from
the recorded console offset, and the job ends SUCCEEDED with every line exactly once. The
private redis-server keeps an append-only file, so the records survive its restart."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.integration.conftest import Fleet
from tests.integration.test_redis_outage import PrivateRedis
from tests.integration.test_run_on_vm import assert_clean, numbered, submit, wait_for
from worker.states import JobState

pytestmark = pytest.mark.integration
RETRY_S = 2.0  # every Redis call's retry budget (the runner's, the attach client's)
LEASE_TTL_S = 3.0  # the fleet's
OUTAGE_S = 20.0
LINES = 160
PAUSE_S = 0.25  # the job runs ~40 s: it is still running when Redis returns


@pytest.fixture
def private_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateRedis]:
    with PrivateRedis(tmp_path_factory.mktemp("redis")) as r:
        yield r


@pytest.fixture
def redis_url(private_redis: PrivateRedis) -> str:
    return private_redis.url


@pytest.fixture
def fleet_env_extra() -> dict[str, str]:
    return {"COLABQ_REDIS_RETRY_S": str(RETRY_S)}


def phase(fleet: Fleet, job_id: str) -> str | None:
    try:
        return str(json.loads((fleet.job_dir(job_id) / "runner.json").read_text())["phase"])
    except (OSError, ValueError, KeyError):
        return None


def test_redis_down_past_lease_and_retries_the_owner_waits_and_the_job_succeeds(
    fleet: Fleet, private_redis: PrivateRedis
) -> None:
    assert OUTAGE_S > LEASE_TTL_S + RETRY_S + 10
    job_id = submit(fleet, numbered(LINES, PAUSE_S), "--idle", "5s", wall="10m")
    wait_for(lambda: "line-10" in fleet.output(job_id), "the job running, its lines forwarded")
    outage = private_redis.outage(OUTAGE_S)
    # Without Redis the owner says it waits (alive, not busy) and the job runs on on its VM.
    wait_for(lambda: phase(fleet, job_id) == "awaiting_redis", "the owner waiting for Redis", 30)
    outage.join()
    assert fleet.wait_terminal(job_id, timeout_s=180) is JobState.SUCCEEDED, fleet.ledger.get(
        job_id
    ).reason
    # Every line once, in order: what was printed during the outage came from the VM's console
    # from the recorded offset.
    assert fleet.output(job_id) == [f"line-{i}" for i in range(1, LINES + 1)]
    # The same owner carried on: it waited, nobody adopted the job, nothing was handed over.
    texts = [ln.text for ln in fleet.ledger.read_log(job_id, count=10_000)]
    assert any("Redis answers again" in t for t in texts), texts
    assert not any("adopted by" in t for t in texts), texts
    history = [h.reason for h in fleet.ledger.history(job_id)]
    assert not any("adopt" in r for r in history), history
    assert "handed over" not in (fleet.root / "worker.log").read_text()
    # One session, never stopped for idleness while the job ran.
    [assignment] = fleet.billing()
    assert "idle" not in str(fleet.ledger.read_watch(job_id).get("stopped_reason", ""))
    assert assignment["unassigned_at"] is not None
    assert_clean(fleet, job_id)
