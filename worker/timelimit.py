"""A job's two limits, and how a job stopped by them is told apart from one that failed.

Every job has its own time limit (the spec's `ttl_s`: what the wrapper on the VM gives the job
under `timeout`) inside its wall cap (`wall_cap_s`: the whole session, allocation and uploads
included). The wrapper prints a `TIME_LIMIT` sentinel (`exec_time_limit` in the job's watch
record) when `timeout` stopped the job: its exit status was `timeout`'s (124, or 137 after the
kill grace) and the job had run for at least its limit. A job that exits 124 by itself, earlier,
is not timed out. Deciding the state from that is the runner's and the janitor's; this module
only owns the facts and their words, so that submit, status, the report and the pre-flight's ETA
check say the same thing (no pydantic here: the pre-flight imports it at start-up).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from worker.utils import format_duration_s

# The wrapper's `timeout --kill-after` grace, which must also fit inside the wall cap.
KILL_AFTER_S = 120


def reserve_s(wall_cap_s: float) -> float:
    """Time inside the wall cap kept for allocation, uploads and the final sync."""
    return min(max(0.1 * wall_cap_s, 30.0), 1800.0)


def default_ttl_s(wall_cap_s: float) -> float:
    """The job's own time limit by default: what is left of the wall cap after the reserve and
    the kill grace."""
    return max(wall_cap_s - reserve_s(wall_cap_s) - KILL_AFTER_S, 1.0)


# `timeout`'s own exit statuses: the job got SIGTERM at its limit (124), or SIGKILL after the
# kill grace (128 + 9).
TIMEOUT_EXIT_CODES = (124, 137)


class Limited(Protocol):
    """What a spec says about its limits (a `JobSpec`, or anything shaped like one)."""

    @property
    def ttl_s(self) -> float: ...

    @property
    def wall_cap_s(self) -> float: ...


def hit_time_limit(watch: Mapping[str, str]) -> bool:
    """Whether the wrapper on the VM reported that `timeout` stopped the job at its limit."""
    return bool(watch.get("exec_time_limit"))


def limits_text(spec: Limited) -> str:
    """`time limit 2m30s (wall cap 5m00s)`: what the job itself may run, then the session's cap."""
    return (
        f"time limit {format_duration_s(spec.ttl_s)} "
        f"(wall cap {format_duration_s(spec.wall_cap_s)})"
    )


def limits_json(spec: Limited) -> dict[str, float]:
    return {"time_limit_s": spec.ttl_s, "wall_cap_s": spec.wall_cap_s}


def timed_out_reason(spec: Limited, exit_code: int | None) -> str:
    """The reason of a job `timeout` stopped at its own time limit, with what to do next."""
    how = f" (exit {exit_code})" if exit_code is not None else ""
    return (
        f"the job's time limit {format_duration_s(spec.ttl_s)} ran out: stopped by the "
        f"wrapper's timeout{how}, inside its wall cap {format_duration_s(spec.wall_cap_s)}; "
        "give it a longer --wall (or --ttl), or resume it in segments (--resume-from)"
    )
