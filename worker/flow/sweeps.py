"""A sweep as one unit: its id, the Redis keys that index its points, and reading them.

Every sweep gets an id at submit (`sw` and 12 hex digits, then `.<owner>` under Redis ACLs, as a
job id: `worker.people`). The creation script (`worker.records.create`) records it on each
point's record (field `sweep`) and adds each point to the sweep's set of jobs, in the same
atomic step. Its keys are `<prefix>:sweep:<id>...`, written by the gate and the services only (an
owned sweep's id names its owner, as a job's does), never in a user's own namespace.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from worker.people.owners import SEPARATOR
from worker.records import ids

if TYPE_CHECKING:
    from redis import Redis

    from worker.records.keys import Keys


@dataclass(frozen=True)
class SweepTag:
    """What the creation script records of a sweep: its id and its cap (0: none)."""

    sweep_id: str
    max_parallel: int = 0


def new_sweep_id(owner: str | None) -> str:
    base = "sw" + secrets.token_hex(6)
    return f"{base}{SEPARATOR}{owner}" if owner else base


def sweep_base(keys: Keys, sweep_id: str) -> str:
    """Hash: the sweep's settings (max_parallel, created_at). Its other keys append to it."""
    return f"{keys.prefix}:sweep:{sweep_id}"


def sweep_jobs(keys: Keys, sweep_id: str) -> str:
    """Sorted set: the ids of the sweep's points, by their place in the sweep."""
    return sweep_base(keys, sweep_id) + ":jobs"


def sweep_running(keys: Keys, sweep_id: str) -> str:
    """Set: the points that hold (or are about to hold) a GPU, from their claim on."""
    return sweep_base(keys, sweep_id) + ":running"


def no_sweep(sweep_id: str) -> str:
    """The one line for a sweep id that names no sweep."""
    return (
        f"No sweep {sweep_id!r}: `colabq submit` prints a sweep's id (sw..., also in its --json "
        "as sweep); its points' records may have expired."
    )


def points_of(r: Redis, keys: Keys, sweep_id: str) -> list[str]:
    """The ids of the sweep's points in their order, or [] for no such sweep."""
    key = sweep_jobs(keys, sweep_id)
    return ids.members("job id", r.zrange(key, 0, -1), key)
