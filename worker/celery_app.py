"""The Celery app: every non-default Celery setting, each with its reason.

`build_app(settings)` is what colabq's own entry points use. The module-level `app` exists only
for `celery -A worker.celery_app …`; it reads its settings when Celery configures it, not at
import time.

Flower runs on this app too (`colabq flower`, or Celery's own `celery … flower`): whichever way
it is started, `worker.flowerlogin` stops it, in one line, unless its final options hold a
login (its guard is connected here to the signal Flower's app sends as it is built).

A worker imports `WORKER_MODULES` when it starts (Celery's `include`): the tasks register
themselves (`worker.tasks`) and the worker's start and stop connect their signals
(`worker.lifecycle`). They are named, never imported, here: they build on this floor (task
names from `worker.tasknames`), and a producer that only sends tasks by name loads neither.
"""

from __future__ import annotations

from typing import Any

from celery import Celery

from worker.flowerlogin import connect_guard
from worker.records.sentinelurl import broker_transport_options, broker_url, broker_use_ssl
from worker.settings import Settings, load_settings
from worker.tasknames import ADOPT, JANITOR, RUN_JOB, job_argsrepr

__all__ = ["ADOPT", "JANITOR", "RUN_JOB", "build_app", "celery_config", "job_argsrepr"]

WORKER_MODULES = ("worker.tasks", "worker.lifecycle")


def celery_config(settings: Settings) -> dict[str, Any]:
    return {
        **_tls_config(settings),
        # The ledger's Redis (`worker.records.sentinelurl`): with Sentinel, kombu's sentinel
        # transport, told the master's name; its events and worker_direct queues go there too.
        "broker_url": broker_url(settings.redis_url),
        # The ledger is the record of every job; Celery results would be a second, weaker copy.
        "task_ignore_result": True,
        "result_backend": None,
        # Early acknowledgement: Redis only emulates acks, and a multi-hour task would be
        # redelivered after visibility_timeout. Recovery belongs to the ledger and the janitor.
        "task_acks_late": False,
        "task_reject_on_worker_lost": False,
        # Even with early acks, keep any unacked message from coming back during a long job.
        "broker_transport_options": {
            "visibility_timeout": 7 * 24 * 3600,
            **broker_transport_options(
                settings.redis_master_name, settings.redis_url, settings.sentinel_login()
            ),
        },
        # One slot is one Colab session: never reserve a second job while one runs. With early
        # acks, prefetch 1 still lets a busy worker take the next message (the running one is
        # acked), while an idle worker waits; Celery >= 5.6 on Redis stops consuming while every
        # slot holds a request, so the next job goes to a worker that can start it now.
        "worker_prefetch_multiplier": 1,
        "worker_disable_prefetch": True,
        "worker_concurrency": 1,
        # Flower sees nothing unless workers send events (off by default).
        "worker_send_task_events": True,
        "task_send_sent_event": True,
        "task_track_started": True,
        # JSON only: the spec is JSON, and pickle would let the broker run code on workers.
        "task_serializer": "json",
        "accept_content": ["json"],
        "broker_connection_retry_on_startup": True,
        # Jobs are sent to gpu.<type> explicitly; nothing should land in a default queue unseen.
        "task_default_queue": "colabq.misc",
        "worker_hijack_root_logger": False,
        # Each worker also consumes its own queue, where it sends itself, when it starts, the
        # jobs it owned before it died: adoption takes its one slot like any job.
        "worker_direct": True,
        # The janitor runs from exactly one beat; its pass also takes a Redis lock.
        "beat_schedule": {
            "janitor": {
                "task": JANITOR,
                "schedule": settings.janitor_interval_s,
                "options": {"queue": "colabq.janitor", "expires": settings.janitor_interval_s},
            }
        },
    }


def _tls_config(settings: Settings) -> dict[str, Any]:
    # A sentinel URL's TLS, for the master (the sentinels' is in the transport options); a
    # rediss:// URL says its own, and any other URL keeps Celery's default.
    tls = broker_use_ssl(settings.redis_url)
    return {"broker_use_ssl": tls} if tls else {}


def build_app(settings: Settings) -> Celery:
    app = Celery("colabq", include=WORKER_MODULES)
    app.conf.update(celery_config(settings))
    return app


app = Celery("colabq", include=WORKER_MODULES)


@app.on_configure.connect  # type: ignore[untyped-decorator]
def _configure(sender: Celery, **_: Any) -> None:
    sender.conf.update(celery_config(load_settings()))


connect_guard()
