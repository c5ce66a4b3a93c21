"""The metrics process (`colabq metrics`): Prometheus's text format over HTTP (`/metrics`, by
`prometheus_client`), each scrape read from the ledger then (`scrape`, two round trips) and the
live jobs kept by a thread that follows the event log (`live`).

A scrape that cannot reach Redis says only `colabq_ledger_up 0` (a Prometheus alert can fire on
it) and the process goes on; the follower waits for Redis and reads the live jobs again from the
ledger when it answers, and every `resync_s` anyway (a record that changed without an event, or
the index forgetting a job, is righted then).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import redis
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from worker.metrics.families import Options, families, ledger_up
from worker.metrics.live import LiveJobs
from worker.metrics.scrape import read_scrape
from worker.records.keys import Keys

FOLLOW_BLOCK_MS = 5000
RETRY_S = 2.0


class LedgerCollector(Collector):
    """Reads the ledger on every scrape (prometheus_client calls `collect`)."""

    def __init__(
        self,
        r: Any,
        keys: Keys,
        live: LiveJobs,
        opts: Options,
        queue_prefix: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.r, self.keys, self.live, self.opts = r, keys, live, opts
        self.queue_prefix, self.clock = queue_prefix, clock
        self.ledger_down = False

    def collect(self) -> Iterator[Metric]:
        try:
            s = read_scrape(self.r, self.keys, self.live.snapshot(), self.queue_prefix,
                            self.clock())  # fmt: skip
        except redis.RedisError as exc:
            if not self.ledger_down:
                why = f"Redis did not answer ({type(exc).__name__})"
                print(f"colabq metrics: {why}; scrapes say colabq_ledger_up 0 until it does",
                      file=sys.stderr, flush=True)  # fmt: skip
            self.ledger_down = True
            yield ledger_up(0)
            return
        self.ledger_down = False
        yield ledger_up(1)
        yield from families(replace(s, skipped=s.skipped + self.live.skipped), self.opts)


@dataclass
class Follower:
    """Keeps `live` from the event log until `stop` is set (a daemon thread's loop)."""

    live: LiveJobs
    stop: threading.Event
    resync_s: float = 300.0
    clock: Callable[[], float] = time.monotonic
    retry_s: float = RETRY_S

    def run(self) -> None:
        loaded_at: float | None = None
        failing = ""
        while not self.stop.is_set():
            try:
                if loaded_at is None or self.clock() - loaded_at >= self.resync_s:
                    self.live.load()
                    loaded_at = self.clock()
                self.live.follow(FOLLOW_BLOCK_MS)
                failing = ""
            except Exception as exc:  # never a dead follower behind a live endpoint
                why = f"{type(exc).__name__}: {exc}"[:300]
                if why != failing:
                    print(f"colabq metrics: following the event log failed ({why}); reading "
                          "the live jobs again", file=sys.stderr, flush=True)  # fmt: skip
                failing, loaded_at = why, None  # read every live job again once it works
                self.stop.wait(self.retry_s)

    def start(self) -> threading.Thread:
        t = threading.Thread(target=self.run, name="colabq-metrics-follow", daemon=True)
        t.start()
        return t


def build_registry(collector: Collector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def serve(registry: CollectorRegistry, port: int, address: str) -> Any:
    """Serve `/metrics` from a daemon thread; returns the server (raises OSError when the
    address cannot be listened on)."""
    server, _thread = start_http_server(port, addr=address, registry=registry)
    return server
