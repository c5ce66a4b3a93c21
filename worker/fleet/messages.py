"""A batch's Celery messages, built in this process exactly as Celery and kombu's Redis transport
would push them, so that the gate's creation script (`worker.records.create`) pushes them onto
their queues in the same atomic step that records the jobs; then their `task-sent` events.

Why not `app.send_task` per message: on the Redis transport each costs about half a millisecond of
Python (routing, signals, retry wrappers, a declare check, a round trip), most of a batch's time.
Here Celery builds each task message (`app.amqp.create_task_message`: headers, properties, body,
event), kombu serializes the body (`kombu.serialization.dumps`) and its channel makes the
transport's envelope (`prepare_message`, `encode_body`); what this module adds is what
`send_task_message` and `Producer.publish` add for a direct queue (the anonymous exchange, so no
binding is read: the list named after the queue is the queue). A test compares a message built
here with the one kombu pushes for the same job (`tests/unit/test_messages.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from celery import Celery
from kombu import serialization
from kombu.entity import maybe_delivery_mode
from kombu.utils.json import dumps
from kombu.utils.uuid import uuid

from worker.fleet.dispatch import copy_ids
from worker.spec import JobSpec, encode_spec
from worker.tasknames import RUN_JOB, job_argsrepr

# kombu's functions are untyped: their types as used here.
_delivery_mode: Callable[[Any], int] = maybe_delivery_mode
_serialize: Callable[[Any, str], tuple[str, str, bytes]] = serialization.dumps
_json: Callable[[Any], str] = dumps


@dataclass(frozen=True)
class Copy:
    """One copy of a job's message: its queue (a Redis list), the message as that list holds it,
    and Celery's `task-sent` event for it (empty when the app sends none)."""

    queue: str
    message: str
    sent_event: dict[str, Any] = field(default_factory=dict)


def build_copies(app: Celery, specs: Sequence[JobSpec], prefix: str) -> list[list[Copy]]:
    """Each spec's copies (one per GPU type it may run on, `dispatch.copy_ids`)."""
    with app.producer_or_acquire() as producer:
        channel = producer.channel
        return [_copies(app, channel, spec, prefix) for spec in specs]


def _copies(app: Celery, channel: Any, spec: JobSpec, prefix: str) -> list[Copy]:
    payload, argsrepr = encode_spec(spec), job_argsrepr(spec)
    out = []
    for task_id, queue in copy_ids(spec, prefix):
        headers, properties, body, sent = app.amqp.create_task_message(
            task_id, RUN_JOB, [payload], {}, reply_to=app.thread_oid,
            create_sent_event=app.conf.task_send_sent_event, argsrepr=argsrepr, kwargsrepr="{}",
            ignore_result=None,  # send_task's, when the task does not say
        )  # fmt: skip
        # send_task passes its options on as properties; publish adds the delivery mode.
        exchange = app.amqp.queues[queue].exchange
        mode = _delivery_mode(exchange.delivery_mode or app.conf.task_default_delivery_mode)
        properties.update(argsrepr=argsrepr, kwargsrepr="{}", delivery_mode=mode)
        ctype, cenc, data = _serialize(body, app.conf.task_serializer)
        message = channel.prepare_message(data, 0, ctype, cenc, headers, properties)
        message["body"], encoding = channel.encode_body(message["body"], channel.body_encoding)
        message["properties"].update(body_encoding=encoding, delivery_tag=uuid())
        message["properties"]["delivery_info"].update(exchange="", routing_key=queue)
        event = dict(sent or {}, queue=queue, exchange="", routing_key=queue) if sent else {}
        out.append(Copy(queue, _json(message), event))
    return out


def publish_sent(app: Celery, copies: Sequence[Copy]) -> None:
    """The `task-sent` events of `copies` (Flower's PENDING rows), buffered into as few
    publishes as Celery's event dispatcher makes (`task.multi` lists)."""
    events = [c.sent_event for c in copies if c.sent_event]
    if not events:
        return
    with app.producer_or_acquire() as producer:
        dispatcher = app.events.Dispatcher(
            producer.connection, buffer_group=["task"], buffer_limit=EVENTS_BATCH
        )
        try:
            for event in events:
                dispatcher.send("task-sent", **event)
            dispatcher.flush()
        finally:
            dispatcher.close()


EVENTS_BATCH = 500
