"""What one scrape reads, in two pipelined round trips whatever the number of jobs: the ended
jobs' counters, the janitor's and the notifier's, every account's balance, the live workers'
names, each GPU queue's length and the watchdog heartbeat and run's progress of each job that
holds a session (bounded by the fleet's slots, not by the queue); then the live workers' cards
and drains. The
live jobs themselves are `live.LiveJobs`'s, kept in memory. Reading changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from worker.accounts.balances import Balance, parse_balances
from worker.fleet import health
from worker.fleet.health import Health
from worker.metrics import counts
from worker.metrics.ended import EndedTotals, read_ended
from worker.metrics.live import LiveJob
from worker.progress import record
from worker.progress.record import Limit, Reading
from worker.records.fleet import WorkerCard, parse_card
from worker.records.keys import Keys, queue_lists
from worker.spec import Gpu, queue_for
from worker.states import JobState


@dataclass(frozen=True)
class WorkerView:
    card: WorkerCard
    health: Health | None  # None: not drained


@dataclass(frozen=True)
class Scrape:
    now: float
    ended: EndedTotals
    live: Mapping[str, LiveJob]
    queues: Mapping[str, int]  # GPU queue name -> messages waiting in it (every priority)
    workers: tuple[WorkerView, ...]
    balances: Mapping[str, Balance]
    janitor: Mapping[tuple[str, str], int]  # (account, action) -> times
    notify: Mapping[tuple[str, str], int]  # (target, state) -> notifications given up on
    beats: Mapping[str, float]  # job holding a session -> its watchdog's last heartbeat
    skipped: int  # fields and records that did not parse
    # job holding a session -> its run's progress and time limit (`worker.progress.record`)
    progress: Mapping[str, tuple[Reading, Limit | None]] = field(default_factory=dict)


def read_scrape(
    r: Any, keys: Keys, live: Mapping[str, LiveJob], queue_prefix: str, now: float
) -> Scrape:
    """Read a scrape (two round trips; the second only when a worker is alive)."""
    queues = {g.value: queue_for(g, queue_prefix) for g in Gpu}
    held = sorted(j for j, job in live.items() if job.holds_session)
    pipe = r.pipeline(transaction=False)
    pipe.hgetall(keys.metrics_ended())
    pipe.hgetall(keys.metrics_janitor())
    pipe.hgetall(keys.metrics_notify())
    pipe.hgetall(keys.account_usage())
    pipe.zrangebyscore(keys.workers(), f"({now!r}", "+inf")
    for queue in queues.values():
        for name in queue_lists(queue):
            pipe.llen(name)
    for job_id in held:
        pipe.hmget(keys.watch(job_id), "heartbeat_at", *record.FIELDS)
    got = pipe.execute()
    ended_raw, janitor_raw, notify_raw, usage_raw, names_raw = got[:5]
    lengths, beat_raw = got[5 : 5 + 4 * len(queues)], got[5 + 4 * len(queues) :]
    ended = read_ended(ended_raw)
    janitor, bad_j = counts.read_counts(janitor_raw, counts.ACTIONS)
    notify, bad_n = counts.read_counts(notify_raw, (s.value for s in JobState))
    beats = {
        j: b for j, raw in zip(held, beat_raw, strict=True) if (b := _time(raw[0])) is not None
    }
    progress = {}
    for job_id, raw in zip(held, beat_raw, strict=True):
        reading, limit = record.from_fields(raw[1:])
        if reading is not None:
            progress[job_id] = (reading, limit)
    return Scrape(
        now=now, ended=ended, live=live,
        queues={q: sum(int(n) for n in lengths[4 * i : 4 * i + 4])
                for i, q in enumerate(queues.values())},
        workers=_workers(r, keys, [n.decode(errors="replace") for n in names_raw]),
        balances=parse_balances(usage_raw), janitor=janitor, notify=notify, beats=beats,
        skipped=ended.skipped + bad_j + bad_n, progress=progress,
    )  # fmt: skip


def _workers(r: Any, keys: Keys, names: list[str]) -> tuple[WorkerView, ...]:
    if not names:
        return ()
    pipe = r.pipeline(transaction=False)
    pipe.mget([keys.worker_card(n) for n in names])
    pipe.mget([keys.worker_health(n) for n in names])
    cards, healths = pipe.execute()
    views = [
        WorkerView(card, health.parse(h))
        for raw, h in zip(cards, healths, strict=True)
        if (card := parse_card(raw)) is not None
    ]
    return tuple(sorted(views, key=lambda v: v.card.name))


def _time(raw: bytes | None) -> float | None:
    try:
        at = float(raw) if raw is not None else math.nan
    except ValueError:
        return None
    return at if math.isfinite(at) else None
