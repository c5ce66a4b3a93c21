"""A worker process reads its settings and opens its Redis clients once, not once per task."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import fakeredis
import pytest

from tests.factories import make_spec
from worker import tasks
from worker.clock import FakeClock
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.settings import Settings
from worker.spec import encode_spec
from worker.states import JobState


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[Settings]:
    seen: list[Settings] = []

    def counted() -> Settings:
        seen.append(Settings())
        return seen[-1]

    monkeypatch.setattr(tasks, "load_settings", counted)
    tasks.worker_context.cache_clear()
    yield seen
    tasks.worker_context.cache_clear()


def test_tasks_share_one_context_per_process(loads: list[Settings]) -> None:
    me: Any = SimpleNamespace(request=SimpleNamespace(hostname="w@h"), send_event=print, app=None)
    for _ in range(3):
        with pytest.raises(tasks.JobDidNotSucceed, match="REFUSED"):
            tasks.run_job_task(me, "not a spec")
    assert len(loads) == 1
    ctx = tasks.worker_context()
    assert ctx.settings is loads[0]
    assert ctx.ledger.r is not ctx.beat_ledger.r, "the lease keeps a client of its own"


def test_a_forked_pool_process_builds_its_own(loads: list[Settings]) -> None:
    parent = tasks.worker_context()
    tasks._fresh_context()
    child = tasks.worker_context()
    assert child is not parent and len(loads) == 2


def test_a_recorded_job_whose_spec_this_worker_refuses_ends_failed_not_queued() -> None:
    """A job an older colabq queued (here a wall cap over today's 24 h limit) is refused when
    the worker decodes it, and its record says so instead of staying QUEUED forever."""
    ledger = Ledger(fakeredis.FakeRedis(), FakeClock(), Keys("t"), log_maxlen=100)
    job_id, _ = ledger.create(make_spec())
    old = json.loads(encode_spec(ledger.get(job_id).spec))
    old["wall_cap_s"] = 48 * 3600.0
    result = tasks.execute_job(json.dumps(old), Settings(), ledger, "w@h")
    assert result["state"] == "refused"
    rec = ledger.r.hgetall(ledger.keys.job(job_id))
    assert rec[b"state"] == JobState.FAILED.value.encode()
    assert b"refused by the worker" in rec[b"reason"] and b"wall_cap_s" in rec[b"reason"]


def test_a_refused_message_naming_no_known_job_changes_nothing() -> None:
    ledger = Ledger(fakeredis.FakeRedis(), FakeClock(), Keys("t"), log_maxlen=100)
    job_id, _ = ledger.create(make_spec())
    assert (
        tasks.execute_job('{"job_id": "feedfacefeedface"}', Settings(), ledger, "w")["state"]
        == "refused"
    )
    assert tasks.execute_job("[]", Settings(), ledger, "w")["state"] == "refused"
    assert ledger.get(job_id).state is JobState.QUEUED
