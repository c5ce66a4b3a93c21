"""The gate's messages (`worker.fleet.messages`) are the ones Celery and kombu push for the same
job: on the real Redis, a job with a fallback GPU type sent by `app.send_task` (through kombu),
and built here; the two copies of each are equal but for kombu's random delivery tag, and their
`task-sent` events are Celery's."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from tests.factories import make_spec
from worker.celery_app import build_app
from worker.fleet.dispatch import send_job
from worker.fleet.messages import build_copies
from worker.settings import load_settings
from worker.spec import Gpu, decode_spec


class Recorder:
    """An event dispatcher that keeps what Celery would publish."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def publish(self, type: str, fields: dict[str, Any], producer: Any, **_: Any) -> None:
        assert type == "task-sent"
        self.events.append(fields)


@pytest.fixture
def client(redis_client: redis.Redis, key_prefix: str) -> Iterator[redis.Redis]:
    yield redis_client
    for pattern in (f"{key_prefix}*", f"_kombu.binding*.{key_prefix}*"):
        for key in redis_client.scan_iter(pattern):
            redis_client.delete(key)


def test_a_built_message_is_the_one_kombu_pushes(
    client: redis.Redis, redis_url: str, key_prefix: str
) -> None:
    prefix = f"{key_prefix}."
    app = build_app(load_settings(redis_url=redis_url, queue_prefix=prefix))
    spec = make_spec(gpu=Gpu.A100, gpu_fallback=(Gpu.L4,), env={"LR": "3e-4"})
    recorder = Recorder()
    queues = send_job(app, spec, prefix, event_dispatcher=recorder)
    theirs = [json.loads(client.rpop(q) or b"") for q in queues]
    [ours] = build_copies(app, [spec], prefix)
    assert [c.queue for c in ours] == queues == [f"{prefix}gpu.a100", f"{prefix}gpu.l4"]
    for copy, kombus in zip(ours, theirs, strict=True):
        mine = json.loads(copy.message)
        tags = (mine["properties"].pop("delivery_tag"), kombus["properties"].pop("delivery_tag"))
        assert all(len(t) == 36 for t in tags) and tags[0] != tags[1]
        assert mine == kombus
        args, kwargs, _ = json.loads(base64.b64decode(mine["body"]))
        assert kwargs == {} and decode_spec(args[0]) == spec
    assert [c.sent_event for c in ours] == recorder.events
    assert len(recorder.events) == 2
