"""A sweep's `task-sent` events (Flower's PENDING rows) arrive, one per job, in one message
published by the gate that sends the sweep's messages."""

from __future__ import annotations

import secrets
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from producer.submit import SubmitRequest, build_spec, enqueue_many
from tests.gatethread import running_gate
from worker.celery_app import build_app
from worker.records.ledger import Ledger
from worker.settings import Settings, load_settings

pytestmark = pytest.mark.integration


def test_a_batch_sends_every_task_sent_event_in_one_publish(
    redis_url: str, ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = build_app(Settings(redis_url=redis_url))
    script = tmp_path / "train.sh"
    script.write_text("echo hi\n")
    (tmp_path / "store").mkdir()
    tag = secrets.token_hex(3)
    specs = [
        build_spec(
            SubmitRequest(
                script=script,
                run_name=f"mnist-mlp-bs64-lr1e-3-{tag}-{i}",
                commit="abc1234",
                local_store=tmp_path / "store",
            )
        )
        for i in range(3)
    ]
    seen: list[dict[str, Any]] = []
    with app.connection_for_read() as conn:
        receiver = app.events.Receiver(conn, handlers={"task-sent": seen.append})
        listening = threading.Thread(
            target=lambda: receiver.capture(limit=3, timeout=20), daemon=True
        )
        listening.start()
        client = redis.Redis.from_url(redis_url)
        deadline = time.monotonic() + 10
        while not (client.pubsub_numpat() or client.pubsub_channels()):
            assert time.monotonic() < deadline, "the event receiver never subscribed"
            time.sleep(0.05)
        publishes: list[str] = []
        real = redis.Redis.publish

        def counted(self: redis.Redis, channel: Any, message: Any, **kw: Any) -> Any:
            publishes.append(str(channel))
            return real(self, channel, message, **kw)

        prefix = ledger.keys.prefix
        settings = load_settings(redis_url=redis_url, key_prefix=prefix, queue_prefix=prefix + ".")
        with running_gate(settings):
            monkeypatch.setattr(redis.Redis, "publish", counted)
            done = enqueue_many(specs, ledger).jobs
            listening.join(20)
    assert [e.created for e in done] == [True, True, True]
    assert sorted(e["uuid"] for e in seen) == sorted(e.job_id for e in done)
    assert {e["queue"] for e in seen} == {ledger.keys.prefix + ".gpu.t4"}
    assert len([c for c in publishes if "celeryev" in c]) == 1, publishes
