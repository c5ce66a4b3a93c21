"""Sending a job's message, written once: to the queue of every GPU type it may run on.

A job with fallback types (`--gpu A100,L4`) is sent to each type's queue, so that any worker
serving one of them can take it; the ledger's claim makes exactly one of the copies run it, and
the others are skipped when they arrive. The first copy's task id is the job id (Flower's row);
the others' are `<job id>.<type>`. A new batch's messages are pushed by the gate's creation script
instead (`worker.fleet.messages`). Worker-side stop and resume of consumption (a drain) goes
through Celery's remote control, as `celery control cancel_consumer` does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from celery import Celery

from worker.records import ids
from worker.spec import Gpu, JobSpec, encode_spec, queue_for
from worker.tasknames import RUN_JOB, job_argsrepr


def copy_ids(spec: JobSpec, prefix: str = "") -> list[tuple[str, str]]:
    """(task id, queue) of each copy of the job's message, the first choice first."""
    return [
        (spec.job_id if i == 0 else f"{spec.job_id}.{gpu.value.lower()}", queue_for(gpu, prefix))
        for i, gpu in enumerate(spec.gpus)
    ]


def jobs_of_task(task_id: object) -> set[str]:
    """The job ids a copy's task id may name (each a job id, `ids`): the id itself (a first
    copy), and the id without a `.<gpu>` ending (a fallback type's copy). Both are returned
    where both could be: an owned id `<hex>.<user>` whose user is named like a GPU type
    (`<hex>.t4`) reads either way, and a set of waiting jobs that holds one more id is harmless."""
    text = ids.text(task_id) or ""
    base, _, gpu = text.rpartition(".")
    found = {text, base} if gpu.upper() in Gpu.__members__ else {text}
    return {j for j in found if ids.job_id(j) is not None}


def send_job(app: Celery, spec: JobSpec, prefix: str = "", **options: Any) -> list[str]:
    """Send the job's message to every queue that may serve it; returns the queues."""
    payload = encode_spec(spec)
    queues = []
    for task_id, queue in copy_ids(spec, prefix):
        app.send_task(
            RUN_JOB, args=[payload], queue=queue, task_id=task_id,
            argsrepr=job_argsrepr(spec), kwargsrepr="{}", **options,
        )  # fmt: skip
        queues.append(queue)
    return queues


def stop_consuming(app: Celery, worker: str, queues: Iterable[str]) -> None:
    """Ask `worker` to stop taking messages from `queues` (fire and forget: a lost request is
    caught by the worker's own drained check when it takes its next message)."""
    for queue in queues:
        app.control.cancel_consumer(queue, destination=[worker])


def resume_consuming(app: Celery, worker: str, queues: Iterable[str]) -> None:
    for queue in queues:
        app.control.add_consumer(queue, destination=[worker])
