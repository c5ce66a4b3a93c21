"""P11: one scrape of `colabq metrics` (`GET /metrics` over HTTP, the collector in this process)
on a ledger of 10,000 jobs, then of 100: its time, its Redis round trips and its Redis commands.

The ledger: 90 % of the jobs ended through the ledger's own transitions (four final states,
three GPU types, two accounts, twenty users), 10 % QUEUED, eight RUNNING with a watchdog
heartbeat, four live workers (one drained) and two balances. Round trips are counted at the
socket (`Connection.send_packed_command`: a pipeline is one); commands by the server itself
(`INFO commandstats`, summed over every command but INFO, on a redis-server of the bench's own).
The anchor is what a scrape would cost if it counted by scanning: every job's state, GPU,
account and user read (the index, then one pipelined HMGET per job). Also printed: how long the
live jobs take to load at start-up, and the commands a terminal transition costs.

Target: median <= 0.1 s at 10k jobs, <= 3 round trips, and the same round trips and commands at
100 jobs as at 10,000.

    .venv/bin/python ops/bench/metrics_bench.py [--jobs 10000] [--small 100] [--runs 5]
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from redis.connection import AbstractConnection

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ops.bench.figures import Figure, check_runs, emit
from ops.bench.rig import private_redis
from producer.broker import free_port
from tests.factories import make_spec
from worker.accounts.balances import record_usage
from worker.clock import SystemClock
from worker.colab.parse import Usage
from worker.fleet.health import drain_by_hand
from worker.metrics.families import Options
from worker.metrics.live import LiveJobs
from worker.metrics.service import LedgerCollector, build_registry, serve
from worker.records.fleet import WorkerCard, publish
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.spec import Gpu
from worker.states import JobState as S

TRIPS = 0
_send = AbstractConnection.send_packed_command
ENDINGS = ((S.FAILED,), (S.CANCELLED,), (S.FAILED_NO_GPU,), (S.RELEASING, S.SUCCEEDED))
GPUS = (Gpu.T4, Gpu.L4, Gpu.A100)
ACCOUNTS = ("lab@example.com", "team@example.com")


def _counting(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
    global TRIPS
    TRIPS += 1
    _send(self, command, check_health)


def commands(r: redis.Redis) -> int:
    stats: Any = r.info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")


def populate(ledger: Ledger, jobs: int) -> None:
    """`jobs` jobs: 90 % ended, 10 % queued, eight of those running (see the docstring)."""
    specs = [make_spec(gpu=GPUS[i % 3], submitted_by=f"user{i % 20}@host") for i in range(jobs)]
    for start in range(0, jobs, 500):
        ledger.create_many(specs[start : start + 500])
    ended = jobs * 9 // 10
    for i, spec in enumerate(specs):
        if i >= ended + 8:
            break
        assert ledger.claim(spec.job_id, "w", ttl_s=3600)
        ledger.transition(spec.job_id, S.ALLOCATING, owner="w", reason="claimed")
        ledger.set_fields(spec.job_id, owner="w", account=ACCOUNTS[i % 2], endpoint=f"gpu-{i}")
        if i >= ended:  # running, its watchdog beating
            for st in (S.STARTING, S.RUNNING):
                ledger.transition(spec.job_id, st, owner="w", reason=st.value)
            ledger.record_watch(spec.job_id, {"heartbeat_at": repr(time.time())})
            continue
        for st in ENDINGS[i % 4]:
            ledger.transition(spec.job_id, st, owner="w", reason=st.value)
    now = time.time()
    for n, gpu in enumerate(("T4", "T4", "L4", "A100")):
        card = WorkerCard(f"w{n}@bench", "bench", (gpu,), (f"gpu.{gpu.lower()}",),
                          None, now, now, ACCOUNTS[n % 2])  # fmt: skip
        publish(ledger.r, ledger.keys, card, ttl_s=3600)
    drain_by_hand(ledger.r, ledger.keys, "w3@bench", "by hand", now, "ops")
    for a in ACCOUNTS:
        record_usage(ledger.r, ledger.keys, a, Usage(80.0, 1.76, 1), by="bench", now=now)


def transition_cost(ledger: Ledger) -> tuple[int, int]:
    """(commands, of them the metrics counters': their EVAL and the additions it makes) of one
    claimed job's terminal transition (no GPU held: no held-time addition of the ledger's own)."""
    spec = make_spec()
    ledger.create(spec)
    assert ledger.claim(spec.job_id, "w", ttl_s=60)
    ledger.transition(spec.job_id, S.ALLOCATING, owner="w", reason="claimed")

    def adds() -> int:
        stats: Any = ledger.r.info("commandstats")
        return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0))
                   for c in ("hincrby", "hincrbyfloat"))  # fmt: skip

    before, added = commands(ledger.r), adds()
    ledger.transition(spec.job_id, S.FAILED, owner="w", reason="bench")
    return commands(ledger.r) - before, adds() - added + 1


def scan_anchor(ledger: Ledger) -> None:
    ids = ledger.r.zrange(ledger.keys.jobs(), 0, -1)
    pipe = ledger.r.pipeline(transaction=False)
    for i in ids:
        pipe.hmget(ledger.keys.job(i.decode()), "state", "gpu", "account", "user")
    pipe.execute()


def measure(fn: Callable[[], object], r: redis.Redis) -> tuple[float, int, int]:
    """(seconds, round trips, commands) of `fn` (commandstats read outside the count)."""
    before_cmds = commands(r)
    before = TRIPS
    t0 = time.perf_counter()
    fn()
    took, trips = time.perf_counter() - t0, TRIPS - before
    return took, trips, commands(r) - before_cmds


def scrapes(url: str, jobs: int, runs: int) -> tuple[list[tuple[float, int, int]], list[Any]]:
    """Build a ledger of `jobs` jobs, serve it, and scrape it `runs` times (and the anchor)."""
    r = redis.Redis.from_url(url)
    ledger = Ledger(r, SystemClock(), Keys(f"colabq-bench-{secrets.token_hex(4)}"),
                    log_maxlen=1000)  # fmt: skip
    t0 = time.perf_counter()
    populate(ledger, jobs)
    print(f"ledger: {jobs} jobs ({time.perf_counter() - t0:.1f} s to build)")
    cost = transition_cost(ledger)
    live = LiveJobs(r, ledger.keys)
    t0 = time.perf_counter()
    n = live.load()
    print(f"  start-up: {n} live jobs loaded in {time.perf_counter() - t0:.3f} s")
    opts = Options(floor_for=lambda a: 10.0)
    port = free_port()
    server = serve(build_registry(LedgerCollector(r, ledger.keys, live, opts, "")), port,
                   "127.0.0.1")  # fmt: skip

    def get() -> bytes:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
            return bytes(resp.read())

    try:
        body = get()
        assert b"colabq_ledger_up 1.0" in body and b"colabq_jobs_ended_total" in body
        AbstractConnection.send_packed_command = _counting  # type: ignore[method-assign]
        got = [measure(get, r) for _ in range(runs)]
        anchors = [measure(lambda: scan_anchor(ledger), r) for _ in range(runs)]
    finally:
        AbstractConnection.send_packed_command = _send  # type: ignore[method-assign]
        server.shutdown()
    return got, [anchors, cost]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--small", type=int, default=100)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    check_runs(args.runs)
    with private_redis() as (url, _):
        big, (anchors, cost) = scrapes(url, args.jobs, args.runs)
        small, _ = scrapes(url, args.small, args.runs)

    def fig(xs: list[tuple[float, int, int]]) -> str:
        ts = [t for t, _, _ in xs]
        trips, cmds = max(n for _, n, _ in xs), max(c for _, _, c in xs)
        return (f"median {statistics.median(ts):.4f} s ({min(ts):.4f}-{max(ts):.4f}), "
                f"{trips} round trips, {cmds} commands")  # fmt: skip

    print(f"P11 scrape, {args.jobs} jobs ({args.runs} runs): {fig(big)}")
    print(f"   scrape, {args.small} jobs: {fig(small)}")
    print(f"   anchor, every job read (a scan), {args.jobs} jobs: {fig(anchors)}")
    print(
        f"   a terminal transition: {cost[0]} Redis commands, {cost[1]} of them the metrics "
        "counters' (one EVAL and the additions it makes)"
    )
    trips, cmds = max(n for _, n, _ in big), max(c for _, _, c in big)
    same = (trips, cmds) == (max(n for _, n, _ in small), max(c for _, _, c in small))
    med = statistics.median(t for t, _, _ in big)
    emit([
        Figure(
            "P11", f"`/metrics` scrape, {args.jobs // 1000}k jobs", "s", [t for t, _, _ in big],
            [t for t, _, _ in anchors], "every job read (a scan)",
            "<= 0.1 s, <= 3 round trips, same at 100 jobs", med <= 0.1 and trips <= 3 and same,
            note=f"{trips} round trips and {cmds} commands a scrape at {args.jobs} jobs "
            f"({'the same' if same else 'NOT the same'} at {args.small}); a terminal "
            f"transition costs {cost[0]} commands, {cost[1]} of them the counters'",
            extra={"round_trips": float(trips), "commands": float(cmds)},
        )
    ])  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
