"""The Celery app: every non-default Celery setting, each with its reason, and task registration.

`build_app(settings)` is what colabq's own entry points use. The module-level `app` exists only
for `celery -A worker.celery_app …`; it reads its settings when Celery configures it, not at
import time.
"""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.signals import worker_ready

from worker.settings import Settings, load_settings

RUN_JOB = "colabq.run_job"
ADOPT = "colabq.adopt"
JANITOR = "colabq.janitor"


def celery_config(settings: Settings) -> dict[str, Any]:
    return {
        "broker_url": settings.redis_url,
        # The ledger is the record of every job; Celery results would be a second, weaker copy.
        "task_ignore_result": True,
        "result_backend": None,
        # Early acknowledgement: Redis only emulates acks, and a multi-hour task would be
        # redelivered after visibility_timeout. Recovery belongs to the ledger and the janitor.
        "task_acks_late": False,
        "task_reject_on_worker_lost": False,
        # Even with early acks, keep any unacked message from coming back during a long job.
        "broker_transport_options": {"visibility_timeout": 7 * 24 * 3600},
        # One slot is one Colab session: never reserve a second job while one runs.
        "worker_prefetch_multiplier": 1,
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


def register_tasks(app: Celery) -> None:
    from worker import tasks

    app.task(name=RUN_JOB, bind=True)(tasks.run_job_task)
    app.task(name=ADOPT, bind=True)(tasks.adopt_task)
    app.task(name=JANITOR)(tasks.janitor_task)


def build_app(settings: Settings) -> Celery:
    app = Celery("colabq")
    app.conf.update(celery_config(settings))
    register_tasks(app)
    return app


app = Celery("colabq")


@app.on_configure.connect  # type: ignore[untyped-decorator]
def _configure(sender: Celery, **_: Any) -> None:
    sender.conf.update(celery_config(load_settings()))


register_tasks(app)


@worker_ready.connect  # type: ignore[untyped-decorator]
def _adopt_own_orphans(sender: Any, **_: Any) -> None:
    """A worker restarted after a crash takes back the jobs it owned (found in its state dir)."""
    from celery.utils.nodenames import worker_direct

    from worker.tasks import orphans_to_adopt

    queues = list(sender.app.amqp.queues.consume_from or {})
    for job_id in orphans_to_adopt(load_settings(), queues):
        sender.app.send_task(ADOPT, args=[job_id], queue=worker_direct(sender.hostname))
