"""`colabq worker` and `colabq beat`: the two long-running processes, each a Celery worker
built from the settings (`worker.celery_app`): a worker serves GPU queues, one slot a Colab
session; beat runs the schedule with the janitor's own queue. Bad input (a GPU type Colab does
not have) is refused before anything starts.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from producer.clictx import _connect, build_app, load_settings, queue_for

LogLevelOpt = Annotated[
    str, typer.Option(help="Celery's log level: DEBUG, INFO, WARNING, ERROR or CRITICAL.")
]


def worker(
    gpu: Annotated[
        list[str] | None, typer.Option(help="GPU queues to serve (default: all).")
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Slots = Colab sessions at once.")] = 1,
    name: Annotated[str | None, typer.Option(help="Celery node name.")] = None,
    loglevel: LogLevelOpt = "INFO",
) -> None:
    """Run a Celery worker: each slot holds one Colab session at a time."""
    check_gpu_types(gpu or ())
    settings = load_settings()
    settings.ensure_state_dir()
    _connect(settings)
    gpus = [g.upper() for g in (gpu or settings.worker_gpus)]
    # The pool's processes read their settings again: they allocate only the types served here.
    os.environ["COLABQ_WORKER_GPUS"] = ",".join(gpus)
    queues = ",".join(queue_for(g, settings.queue_prefix) for g in gpus)
    argv = ["worker", "-Q", queues, "-c", str(concurrency)]
    # One name per worker process by default: two workers on one host are two (cards, drains).
    argv += ["-l", loglevel, "-E", "-n", name or f"colabq-{os.getpid()}@%h"]
    build_app(settings).worker_main(argv)


def check_gpu_types(given: list[str] | tuple[str, ...]) -> None:
    """Refuse, before anything starts, a GPU type nothing is ever sent to (a worker serving
    `gpu.v100` would wait forever)."""
    from worker.errors import UserInputError
    from worker.spec import Gpu

    for g in given:
        if g.strip().upper() not in Gpu.__members__:
            raise UserInputError(
                f"--gpu {g!r} is not a Colab GPU type: serve one or several of "
                f"{', '.join(Gpu)} (--gpu T4 --gpu L4)."
            )


def beat(loglevel: LogLevelOpt = "INFO") -> None:
    """Run beat (exactly one per deployment) with its own janitor worker.

    The janitor must run even while every GPU slot is busy for hours, so it has its own queue,
    consumed by this process (a worker with an embedded beat), never by the GPU workers.
    """
    settings = load_settings()
    settings.ensure_state_dir()
    _connect(settings)
    schedule = str(settings.state_dir / "beat-schedule")
    argv = ["worker", "-B", "-s", schedule, "-Q", "colabq.janitor", "-c", "1", "-l", loglevel]
    build_app(settings).worker_main([*argv, "-n", "colabq-beat@%h"])
