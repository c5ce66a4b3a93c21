"""The Celery app: every non-default Celery setting, each with its reason, and task registration.

`build_app(settings)` is what colabq's own entry points use. The module-level `app` exists only
for `celery -A worker.celery_app …`; it reads its settings when Celery configures it, not at
import time.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from celery import Celery
from celery.signals import worker_init, worker_ready, worker_shutdown

from worker.settings import Settings, load_settings
from worker.tasknames import ADOPT, JANITOR, RUN_JOB, job_argsrepr

__all__ = ["ADOPT", "JANITOR", "RUN_JOB", "build_app", "celery_config", "job_argsrepr"]


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


def register_tasks(app: Celery) -> None:
    from worker import tasks

    # A job that did not succeed fails its task (FAILURE in Flower, with the reason): an
    # expected outcome, logged in one line without a traceback.
    ended = (tasks.JobDidNotSucceed,)
    app.task(name=RUN_JOB, bind=True, throws=ended)(tasks.run_job_task)
    app.task(name=ADOPT, bind=True, throws=ended)(tasks.adopt_task)
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


@worker_init.connect  # type: ignore[untyped-decorator]
def _refuse_unless_ready(sender: Any, **_: Any) -> None:
    """A host that would fail every job it takes (no `colab`, a wrong version, no account, an
    unwritable state dir, a bad token file) refuses to start, in one line."""
    from worker.session.checks import worker_host_problem

    problem = worker_host_problem(load_settings())
    if problem is not None:
        print(f"colabq worker: not starting: {problem}", file=sys.stderr, flush=True)
        os._exit(2)  # before Celery consumes anything; no traceback for a known problem


@worker_ready.connect  # type: ignore[untyped-decorator]
def _adopt_own_orphans(sender: Any, **_: Any) -> None:
    """A worker restarted after a crash takes back the jobs it owned (found in its state dir)."""
    from celery.utils.nodenames import worker_direct

    from worker.tasks import orphans_to_adopt

    queues = list(sender.app.amqp.queues.consume_from or {})
    for job_id in orphans_to_adopt(load_settings(), queues):
        sender.app.send_task(ADOPT, args=[job_id], queue=worker_direct(sender.hostname))


_card_keeper: Any = None


@worker_ready.connect  # type: ignore[untyped-decorator]
def _publish_card(sender: Any, **_: Any) -> None:
    """The worker's card in Redis (`colabq workers`; `colabq submit` warns when no live worker
    serves a job's queue), renewed until the worker stops."""
    global _card_keeper
    import socket
    import time

    from celery.worker import state

    from worker.deps import build_redis
    from worker.records.fleet import CardKeeper, WorkerCard
    from worker.records.keys import Keys

    settings = load_settings()
    gpu_prefix = f"{settings.queue_prefix}gpu."
    queues = tuple(sorted(q for q in (sender.app.amqp.queues.consume_from or {})
                          if q.startswith(gpu_prefix)))  # fmt: skip
    if not queues:
        return  # beat's janitor worker serves no GPU queue: not a worker jobs can go to
    now = time.time()
    card = WorkerCard(
        name=sender.hostname, host=socket.gethostname(),
        gpus=tuple(q.removeprefix(gpu_prefix).upper() for q in queues), queues=queues,
        job_id=None, beat_at=now, started_at=now,
    )  # fmt: skip

    def current_job() -> str | None:
        for req in list(state.active_requests):
            if req.task_name == RUN_JOB:
                return str(req.id).split(".", 1)[0]  # a fallback type's copy: `<job id>.<type>`
            if req.task_name == ADOPT and req.args:
                return str(req.args[0])
        return None

    client = build_redis(settings, retry_s=0)  # a beat skipped in an outage; the card lives on
    _card_keeper = CardKeeper(client, Keys(settings.key_prefix), card, current_job)
    _card_keeper.start()
    _start_prober(sender, settings, queues)


_prober: Any = None


def _start_prober(sender: Any, settings: Settings, queues: tuple[str, ...]) -> None:
    """The worker's fleet duties (`worker.fleet.prober`): due capacity retries sent, and a
    drained worker probed until healthy."""
    global _prober
    from celery.utils.nodenames import worker_direct

    from worker.deps import build_ledger
    from worker.fleet.prober import Prober
    from worker.session.checks import worker_host_problem
    from worker.session.owner import find_orphaned

    def adopt(job_id: str) -> None:
        sender.app.send_task(ADOPT, args=[job_id], queue=worker_direct(sender.hostname))

    ledger = build_ledger(settings, retry_s=0)
    _prober = Prober(
        sender.app, settings, ledger, sender.hostname, queues, worker_host_problem,
        orphans=lambda: find_orphaned(settings, handed_over=False), adopt=adopt,
    )  # fmt: skip
    _prober.start()


@worker_shutdown.connect  # type: ignore[untyped-decorator]
def _withdraw_card(**_: Any) -> None:
    if _card_keeper is not None:
        _card_keeper.stop()
    if _prober is not None:
        _prober.stop()
