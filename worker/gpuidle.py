"""A job the GPU idle watch stopped on the VM, and its words.

With `gpu_idle_s` the wrapper runs colabq_gpuidle.py beside the job: GPUs below the threshold
for that long stop the job as `timeout` would, the wrapper syncs as for any end and prints a
`GPU_IDLE` sentinel, "IDLE_S BELOW SINCE_EPOCH" (`exec_gpu_idle` in the job's watch record). The
job then ends FAILED with the reason below, whether its owner or the janitor ends it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from worker.utils import format_duration_s


def idle_text(seconds: float) -> str:
    """`20m`, `1h`, `90s`: a whole number of hours or minutes said so, else format_duration_s."""
    s = round(seconds)
    if s and s % 3600 == 0:
        return f"{s // 3600}h"
    if s and s % 60 == 0:
        return f"{s // 60}m"
    return format_duration_s(s)


def idle_reason(watch: Mapping[str, str]) -> str | None:
    """`GPU idle 20m (below 5 % since 14:03 UTC)` if the watch stopped the job, else None."""
    raw = watch.get("exec_gpu_idle")
    if not raw:
        return None
    parts = raw.split()
    try:
        idle_s, below, since = float(parts[0]), float(parts[1]), float(parts[2])
    except (IndexError, ValueError):
        return "GPU idle: the GPU idle watch stopped the job"
    at = time.strftime("%H:%M", time.gmtime(since))
    return (
        f"GPU idle {idle_text(idle_s)} (below {below:g} % since {at} UTC): the job was stopped "
        "after a final sync; look for a hung dataloader or a deadlock in its log"
    )
