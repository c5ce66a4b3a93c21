"""A worker's health in Redis: a drained worker takes no job until it is healthy again.

A host failure (its Colab login, its CLI, its state dir, its own Redis or Hub connection)
drains the worker that met it: the record says why and since when, how many failures in a row,
and when the next probe is due (capped exponential backoff). `colabq drain` writes a manual
drain, which only `colabq undrain` lifts; an automatic one is lifted by the worker's own probe
(`prober`). No record means healthy. The worker's card shows it (`colabq workers`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import redis

from worker.fleet.capacity import backoff_s
from worker.records.keys import Keys

# An automatic drain outlives a dead worker by this long at most (a restarted worker probes at
# start anyway); a manual one stays until lifted.
AUTO_TTL_S = 24 * 3600


@dataclass(frozen=True)
class Health:
    reason: str
    since: float
    failures: int
    manual: bool
    next_probe_at: float
    by: str = ""

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def parse(raw: bytes | str | None) -> Health | None:
    """A health record as read, or None (healthy, or damaged)."""
    if raw is None:
        return None
    try:
        d = json.loads(raw)
        return Health(
            str(d["reason"]), float(d["since"]), int(d["failures"]), bool(d["manual"]),
            float(d["next_probe_at"]), str(d.get("by", "")),
        )  # fmt: skip
    except (ValueError, KeyError, TypeError):
        return None


def read(r: redis.Redis, keys: Keys, name: str) -> Health | None:
    return parse(r.get(keys.worker_health(name)))


def read_many(r: redis.Redis, keys: Keys, names: Sequence[str]) -> dict[str, Health]:
    if not names:
        return {}
    raws = r.mget([keys.worker_health(n) for n in names])
    return {n: h for n, raw in zip(names, raws, strict=True) if (h := parse(raw)) is not None}


def note_failure(
    r: redis.Redis, keys: Keys, name: str, reason: str, now: float, *, probe_s: float,
    probe_max_s: float,
) -> Health:  # fmt: skip
    """Drain (or keep drained) after a host failure; the next probe backs off. A manual drain
    stays manual."""
    old = read(r, keys, name)
    before = old.failures if old else int(r.get(keys.worker_recent_failures(name)) or 0)
    failures = before + 1
    h = Health(
        reason=reason[:500], since=old.since if old else now, failures=failures,
        manual=old.manual if old else False,
        next_probe_at=now + backoff_s(failures, probe_s, probe_max_s), by=old.by if old else "",
    )  # fmt: skip
    ttl = None if h.manual else int(AUTO_TTL_S)
    r.set(keys.worker_health(name), json.dumps(h.to_json()), ex=ttl)
    return h


def drain_by_hand(r: redis.Redis, keys: Keys, name: str, reason: str, now: float, by: str) -> None:
    h = Health(reason[:500], now, 0, True, float("inf"), by)
    r.set(keys.worker_health(name), json.dumps({**h.to_json(), "next_probe_at": 0}))


def undrain(r: redis.Redis, keys: Keys, name: str, *, remember_s: float = 0) -> bool:
    """Lift the drain. `remember_s`: keep its failures in a row that long (a probe that found
    the host healthy), so a host that breaks again soon probes from where it was."""
    old = read(r, keys, name)
    if old is not None and remember_s > 0:
        r.set(keys.worker_recent_failures(name), str(old.failures), ex=int(remember_s))
    else:
        r.delete(keys.worker_recent_failures(name))
    return bool(r.delete(keys.worker_health(name)))
