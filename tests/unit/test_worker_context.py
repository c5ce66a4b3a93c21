"""A worker process reads its settings and opens its Redis clients once, not once per task."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from worker import tasks
from worker.settings import Settings


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
    me: Any = SimpleNamespace(request=SimpleNamespace(hostname="w@h"), send_event=print)
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
