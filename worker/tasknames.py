"""The names of colabq's Celery tasks and how a job task's arguments are shown, importable by
anything that sends a task without importing the Celery app (which registers the tasks)."""

from __future__ import annotations

from typing import Any

RUN_JOB = "colabq.run_job"
ADOPT = "colabq.adopt"
JANITOR = "colabq.janitor"


def job_argsrepr(spec: Any) -> str:
    """What Flower and the worker log show as a job task's arguments: the run name, GPU and wall
    cap, never the spec (its script, paths and waivers are the user's business)."""
    gpus = ",".join(g.value for g in getattr(spec, "gpus", (spec.gpu,)))
    return f"({spec.run_name!r}, gpu={gpus}, wall={spec.wall_cap_s:g}s)"
