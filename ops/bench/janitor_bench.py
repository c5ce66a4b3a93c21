"""P7: one janitor pass over a big ledger, on the real Redis: wall time and Redis round trips.

The ledger holds 10,000 jobs with a lease entry; 1,000 of those leases expired: 500 jobs that
ended but whose entry stayed behind (the pass drops them), 500 whose owner died while their
watchdog lives on (left alone). A pass is timed as the beat host runs it (`janitor_pass` with
the real ledger), acting, but with an empty account listing: `colab sessions` is one remote
call whose time is Colab's, not the ledger's. Round trips are counted at the socket
(`Connection.send_packed_command`: a pipeline is one). The anchor is the floor of any pass: the
two reads every pass needs (active set and expired leases), pipelined, in one round trip.

Target: median <= 0.2 s and <= 10 round trips.

    .venv/bin/python ops/bench/janitor_bench.py [--jobs 10000] [--expired 1000] [--runs 5]
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from redis.connection import AbstractConnection

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ops.bench.figures import Figure, check_runs, emit
from worker.clock import SystemClock
from worker.janitor.run import JanitorDeps, janitor_pass
from worker.janitor.wiring import waiting_job_ids
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.spec import ArtifactDest, Gpu, JobSpec
from worker.states import JobState as S
from worker.store.artifacts import Verification

TRIPS = 0
_send = AbstractConnection.send_packed_command


def _counting(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
    global TRIPS
    TRIPS += 1
    _send(self, command, check_health)


def spec() -> JobSpec:
    job_id = secrets.token_hex(8)  # each job its own run (one live job per destination)
    return JobSpec(
        job_id=job_id, idempotency_key=secrets.token_hex(8),
        run_name=f"mnist-mlp-bs64-lr1e-3-bench-{job_id}", commit="abc1234", script="echo hi\n",
        gpu=Gpu.T4, wall_cap_s=3600.0, idle_timeout_s=60.0, ttl_s=3000.0, submitted_at=time.time(),
        artifact=ArtifactDest(kind="local", repo="/tmp/colabq-bench-store", prefix=job_id),
    )  # fmt: skip


def populate(ledger: Ledger, jobs: int, expired: int) -> tuple[list[str], list[str]]:
    """`jobs` claimed jobs; the first `expired` of them with their lease in the past."""
    r, k = ledger.r, ledger.keys
    ids = []
    for _ in range(jobs):
        job_id, _ = ledger.create(spec())
        ids.append(job_id)
    for job_id in ids:
        ledger.claim(job_id, "w1", ttl_s=3600)
        ledger.transition(job_id, S.ALLOCATING, owner="w1", reason="claimed")
    ended, orphaned = ids[: expired // 2], ids[expired // 2 : expired]
    for job_id in ended:
        ledger.transition(job_id, S.FAILED, owner="w1", reason="bench")
    pipe = r.pipeline(transaction=False)
    for job_id in ended + orphaned:
        pipe.delete(k.lock(job_id))
    for job_id in orphaned:
        pipe.hset(k.watch(job_id), "heartbeat_at", repr(time.time() + 3600))
    pipe.execute()
    return ended, orphaned


def expire(ledger: Ledger, ids: list[str]) -> None:
    ledger.r.zadd(ledger.keys.leases(), {j: time.time() - 100 for j in ids})


def deps_for(ledger: Ledger, prefix: str) -> JanitorDeps:
    def nothing(*_: object) -> str:
        raise AssertionError("the bench's pass has nothing to adopt, resend or stop")

    return JanitorDeps(
        ledger=ledger, verify=lambda s: Verification(True, 0, (), (), "bench"),
        location=lambda s: "-", account=lambda: [], stop_orphan=nothing, adopt=nothing,
        resend=nothing,
        queued_ids=lambda: waiting_job_ids(ledger, prefix),
    )  # fmt: skip


def anchor(ledger: Ledger) -> None:
    pipe = ledger.r.pipeline(transaction=False)
    pipe.smembers(ledger.keys.active())
    pipe.zrangebyscore(ledger.keys.leases(), "-inf", time.time())
    pipe.execute()


def measure(fn: Callable[[], object]) -> tuple[float, int]:
    before = TRIPS
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0, TRIPS - before


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--expired", type=int, default=1_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = ap.parse_args()
    check_runs(args.runs)
    prefix = f"colabq-bench-{secrets.token_hex(4)}"
    client = redis.Redis.from_url(args.redis_url)
    ledger = Ledger(client, SystemClock(), Keys(prefix), log_maxlen=20_000)
    try:
        t0 = time.perf_counter()
        ended, orphaned = populate(ledger, args.jobs, args.expired)
        print(f"ledger: {args.jobs} jobs, {args.expired} expired leases "
              f"({time.perf_counter() - t0:.1f} s to build)")  # fmt: skip
        AbstractConnection.send_packed_command = _counting  # type: ignore[method-assign]
        passes, anchors = [], []
        for _ in range(args.runs):
            expire(ledger, ended + orphaned)
            anchors.append(measure(lambda: anchor(ledger)))
            before = TRIPS
            t0 = time.perf_counter()
            report = janitor_pass(deps_for(ledger, prefix), dry_run=False)
            passes.append((time.perf_counter() - t0, TRIPS - before))
            dropped = len(report.did("drop lease"))
            left = sum(1 for r in report.rows if r.did == "left alone")
            assert dropped == len(ended) and left == len(orphaned), (dropped, left)
        AbstractConnection.send_packed_command = _send  # type: ignore[method-assign]
    finally:
        AbstractConnection.send_packed_command = _send  # type: ignore[method-assign]
        for key in client.scan_iter(f"{prefix}*", count=10_000):
            client.delete(key)

    def fig(xs: list[tuple[float, int]]) -> str:
        ts = [t for t, _ in xs]
        trips = statistics.median(n for _, n in xs)
        return (f"median {statistics.median(ts):.3f} s ({min(ts):.3f}-{max(ts):.3f}), "
                f"{trips:.0f} round trips")  # fmt: skip

    med = statistics.median(t for t, _ in passes)
    trips = max(n for _, n in passes)
    print(f"P7 janitor pass ({args.runs} runs): {fig(passes)}")
    print(f"   anchor, the two reads pipelined: {fig(anchors)}")
    emit([
        Figure(
            "P7", f"janitor pass, {args.jobs // 1000}k jobs, {args.expired // 1000}k expired",
            "s", [t for t, _ in passes], [t for t, _ in anchors], "the two reads pipelined",
            "<= 0.2 s, <= 10 round trips", med <= 0.2 and trips <= 10,
            note=f"{trips} Redis round trips a pass (anchor "
            f"{max(n for _, n in anchors)})",
            extra={"round_trips": float(trips)},
        )
    ])  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
