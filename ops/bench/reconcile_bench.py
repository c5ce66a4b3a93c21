"""P12: the janitor's walk over the job records (`worker.janitor.reconcile`) on a big ledger: what
one pass costs and how many passes a whole cycle takes.

A private redis-server (its database holds this ledger alone, so SCAN walks exactly it) gets
`--jobs` jobs (100,000) as a ledger keeps them: each its record, history, watch hash and log
stream (four keys), 90 % ended; `--lost` (10) live jobs are taken out of the index of live
jobs. A pass's walk (`find_strays` with the default `janitor_reconcile_keys`) is timed, its
round trips counted at the socket, and the longest single command it makes measured by Redis
(INFO commandstats: what every other client may wait behind); then passes run until the cursor
comes back to 0 (a whole cycle), which must have found every lost job. The anchor is what the
walk replaces: every job's state read (the jobs index, then one pipelined HGET each), what a
full scan every pass costs.

Target: a pass <= 0.2 s (as P7's whole pass), no command of it over 20 ms, and a cycle finds
every lost job.

    .venv/bin/python ops/bench/reconcile_bench.py [--jobs 100000] [--lost 10] [--runs 5]
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import redis
from redis.connection import AbstractConnection

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ops.bench.figures import Figure, check_runs, emit
from ops.bench.rig import private_redis
from worker.clock import SystemClock
from worker.janitor.reconcile import find_strays
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.settings import Settings

TRIPS = 0
_send = AbstractConnection.send_packed_command


def _counting(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
    global TRIPS
    TRIPS += 1
    _send(self, command, check_health)


def populate(r: redis.Redis, keys: Keys, jobs: int, lost: int) -> list[str]:
    """`jobs` jobs with four keys each; the live ones in `active`, but for `lost` of them."""
    now = time.time()
    live, gone = [], []
    pipe = r.pipeline(transaction=False)
    for i in range(jobs):
        job_id = secrets.token_hex(8)
        state = "running" if i % 10 == 0 else "succeeded"
        pipe.hset(keys.job(job_id), mapping={"spec": "{}", "state": state, "owner": "w",
                                             "created_at": repr(now), "run_name": "r"})  # fmt: skip
        pipe.rpush(keys.history(job_id), '{"state": "queued"}')
        pipe.hset(keys.watch(job_id), "segment", "0")
        pipe.xadd(keys.log(job_id), {"line": "hello", "stream": "out"})
        pipe.zadd(keys.jobs(), {job_id: now})
        if state == "running":
            (gone if len(gone) < lost else live).append(job_id)
        if i % 2000 == 1999:
            pipe.execute()
    if live:
        pipe.sadd(keys.active(), *live)
    pipe.execute()
    return gone


def anchor(r: redis.Redis, keys: Keys) -> None:
    ids = r.zrange(keys.jobs(), 0, -1)
    pipe = r.pipeline(transaction=False)
    for job_id in ids:
        pipe.hget(keys.job(job_id.decode()), "state")
    pipe.execute()


def cycle(ledger: Ledger, per_pass: int) -> tuple[int, set[str]]:
    """Passes from the start until the cursor comes back to 0: how many, and what they found."""
    ledger.r.delete(ledger.keys.reconcile_cursor())
    found: set[str] = set()
    passes = 0
    while True:
        walk = find_strays(ledger, per_pass, dry_run=False)
        found |= {s.job_id for s in walk.strays}
        passes += 1
        if walk.cursor == "0":
            return passes, found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--lost", type=int, default=10)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    check_runs(args.runs)
    per_pass = Settings.model_fields["janitor_reconcile_keys"].default
    with private_redis() as (url, _):
        client = redis.Redis.from_url(url)
        try:
            keys = Keys("colabq")
            ledger = Ledger(client, SystemClock(), keys, log_maxlen=20_000)
            t0 = time.perf_counter()
            lost = populate(client, keys, args.jobs, args.lost)
            size = int(client.dbsize())
            print(f"ledger: {args.jobs} jobs, {size} keys, {len(lost)} live jobs out of the index "
                  f"({time.perf_counter() - t0:.1f} s to build)")  # fmt: skip
            AbstractConnection.send_packed_command = _counting  # type: ignore[method-assign]
            walks, anchors, trips, held = [], [], [], []
            for _ in range(args.runs):
                client.config_resetstat()
                before = TRIPS
                t0 = time.perf_counter()
                find_strays(ledger, per_pass, dry_run=False)
                walks.append(time.perf_counter() - t0)
                trips.append(TRIPS - before)
                stats = client.info("commandstats")
                held.append(max(v["usec_per_call"] for v in stats.values()) / 1000)
                t0 = time.perf_counter()
                anchor(client, keys)
                anchors.append(time.perf_counter() - t0)
            passes, found = cycle(ledger, per_pass)
        finally:
            AbstractConnection.send_packed_command = _send  # type: ignore[method-assign]
    med, longest = statistics.median(walks), max(held)
    every = found >= set(lost)
    print(f"P12 walk of {per_pass} keys ({args.runs} runs): median {med:.4f} s "
          f"({min(walks):.4f}-{max(walks):.4f}), {max(trips)} round trips, the longest command "
          f"{longest:.1f} ms")  # fmt: skip
    print(f"    anchor, every job's state read: median {statistics.median(anchors):.3f} s")
    print(f"    a whole cycle: {passes} passes over {size} keys; found {len(found & set(lost))} "
          f"of {len(lost)} lost jobs")  # fmt: skip
    emit([
        Figure(
            "P12", f"janitor's walk, {per_pass // 1000}k of {size // 1000}k keys "
            f"({args.jobs // 1000}k jobs)", "s", walks, anchors, "every job's state read",
            "<= 0.2 s, no command over 20 ms, a cycle finds every lost job",
            med <= 0.2 and longest <= 20 and every,
            note=f"{max(trips)} round trips, the longest command {longest:.1f} ms; a whole "
            f"cycle {passes} passes, found {len(found & set(lost))} of {len(lost)}",
            extra={"round_trips": float(max(trips)), "passes_per_cycle": float(passes),
                   "longest_command_ms": longest},
        )
    ])  # fmt: skip
    return 0 if every else 1


if __name__ == "__main__":
    sys.exit(main())
