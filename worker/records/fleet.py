"""Workers that say what they serve: each live worker keeps a card in Redis (host, Colab
account, GPU types, queues, the job it holds, its last beat), renewed every few seconds and gone
when it stops renewing. `colabq workers` lists the cards; `colabq submit` asks, in the same
round trip as the rest of its reads, whether any live worker serves the job's queue.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import redis

from worker.records import ids
from worker.records.keys import Keys

CARD_TTL_S = 30.0
_HOST = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$")
BEAT_S = 5.0


@dataclass(frozen=True)
class WorkerCard:
    name: str
    host: str
    gpus: tuple[str, ...]
    queues: tuple[str, ...]
    job_id: str | None
    beat_at: float
    started_at: float
    account: str = ""  # its Colab account ('' from a worker before accounts)
    # What its git credentials reach (`worker.session.gitroute`): the hosts of its https read
    # credentials and whether it holds a deploy key. Names only, never a secret.
    git_hosts: tuple[str, ...] = ()
    git_ssh_key: bool = False

    @property
    def busy(self) -> bool:
        return self.job_id is not None

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "gpus": list(self.gpus), "queues": list(self.queues),
                "git_hosts": list(self.git_hosts)}  # fmt: skip


def publish(r: redis.Redis, keys: Keys, card: WorkerCard, ttl_s: float = CARD_TTL_S) -> None:
    """Write or renew the card (one round trip)."""
    until = card.beat_at + ttl_s
    pipe = r.pipeline(transaction=False)
    pipe.set(keys.worker_card(card.name), json.dumps(card.to_json()), px=int(ttl_s * 1000))
    pipe.zadd(keys.workers(), {card.name: until})
    pipe.zremrangebyscore(keys.workers(), "-inf", card.beat_at)
    for queue in card.queues:
        pipe.zadd(keys.queue_workers(queue), {card.name: until})
        pipe.zremrangebyscore(keys.queue_workers(queue), "-inf", card.beat_at)
    pipe.execute()


def withdraw(r: redis.Redis, keys: Keys, name: str, queues: tuple[str, ...]) -> None:
    pipe = r.pipeline(transaction=False)
    pipe.delete(keys.worker_card(name))
    pipe.zrem(keys.workers(), name)
    for queue in queues:
        pipe.zrem(keys.queue_workers(queue), name)
    pipe.execute()


def _card(d: dict[str, Any]) -> WorkerCard:
    return WorkerCard(
        name=str(d["name"]), host=str(d["host"]), gpus=tuple(d["gpus"]),
        queues=tuple(d["queues"]), job_id=d.get("job_id"), beat_at=float(d["beat_at"]),
        started_at=float(d["started_at"]), account=str(d.get("account") or ""),
        git_hosts=_host_names(d.get("git_hosts")), git_ssh_key=d.get("git_ssh_key") is True,
    )  # fmt: skip


def _host_names(value: object) -> tuple[str, ...]:
    """A card's git hosts as read back: anything that is not a host name is dropped."""
    names = value if isinstance(value, list) else []
    return tuple(sorted({n for n in names if isinstance(n, str) and _HOST.fullmatch(n)}))[:200]


def live_workers(r: redis.Redis, keys: Keys, now: float | None = None) -> list[WorkerCard]:
    """The cards of the workers alive now (two round trips), by name."""
    now = time.time() if now is None else now
    raw_names: list[Any] = list(r.zrangebyscore(keys.workers(), f"({now!r}", "+inf"))
    names = ids.members("worker", raw_names, keys.workers())
    if not names:
        return []
    cards = [c for raw in r.mget([keys.worker_card(n) for n in names]) if (c := parse_card(raw))]
    return sorted(cards, key=lambda c: c.name)


def parse_card(raw: bytes | str | None) -> WorkerCard | None:
    """A card as read, or None (gone, or damaged)."""
    if raw is None:
        return None
    try:
        return _card(json.loads(raw))
    except (ValueError, KeyError, TypeError):
        return None


def count_serving(r: redis.Redis, keys: Keys, queue: str, now: float | None = None) -> int:
    """How many live workers consume `queue` (one round trip)."""
    now = time.time() if now is None else now
    return int(r.zcount(keys.queue_workers(queue), f"({now!r}", "+inf"))


class CardKeeper:
    """Renews a worker's card every `beat_s` from a daemon thread; `current_job` says what the
    worker holds now. A Redis error skips a beat (the card lives `ttl_s`)."""

    def __init__(
        self,
        r: redis.Redis,
        keys: Keys,
        card: WorkerCard,
        current_job: Callable[[], str | None],
        beat_s: float = BEAT_S,
    ) -> None:
        self.r, self.keys, self.card, self.current_job = r, keys, card, current_job
        self.beat_s = beat_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="colabq-card", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(redis.RedisError):
            withdraw(self.r, self.keys, self.card.name, self.card.queues)

    def _loop(self) -> None:
        while not self._stop.is_set():
            card = WorkerCard(**{**asdict(self.card), "job_id": self.current_job(),
                                 "beat_at": time.time()})  # fmt: skip
            with contextlib.suppress(redis.RedisError):
                publish(self.r, self.keys, card)
            self._stop.wait(self.beat_s)
