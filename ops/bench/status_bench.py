"""`colabq status` over a ledger of 10,000 jobs: the command's wall time, as a user runs it.

A private redis-server (a free port, no persistence) is filled through the real ledger
(`Ledger.create_many` in batches), then with real transitions: by default the oldest jobs
ended (FAILED), 300 RUNNING (the endpoint recorded as `colab new` returns) and the newest 200
still QUEUED, as a ledger that keeps 30 days of jobs is; `--queued 9700` makes every job live
(the worst case of a filter on live states). Then `colabq status --limit 30`
and `colabq status --state running` run as commands (a new process each time, as a user types
them), median of --runs with min-max, and the CPU seconds they took (a machine loaded by others
stretches wall time far more than CPU time). Anchors, measured in the same run on the same
Redis: the same reads with plain redis-py (ZREVRANGE, then HMGET pipelined: the summary fields
of the 30 shown; for the filter, first its fields of every job), in this process and in a fresh
Python process that does only that; and `colabq status` on an empty ledger (start-up alone).

Target: median <= 1 s for both commands.

    .venv/bin/python ops/bench/status_bench.py [--jobs 10000] [--running 300] [--queued 200]
        [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

from janitor_bench import spec  # noqa: E402 (the same jobs as the janitor bench)

from producer.broker import free_port  # noqa: E402
from producer.joblist import SUMMARY_FIELDS, Filters  # noqa: E402
from tests.conftest import start_redis_server  # noqa: E402
from worker.clock import SystemClock  # noqa: E402
from worker.records.keys import Keys  # noqa: E402
from worker.records.ledger import Ledger  # noqa: E402
from worker.states import JobState as S  # noqa: E402

BATCH = 500
TARGET_S = 1.0

# The anchor as its own process: import redis-py, do the same reads, nothing else. ARGV: url,
# key prefix, shown, the summary fields, the filter's fields (empty: no filter).
ANCHOR = """
import sys, redis
r = redis.Redis.from_url(sys.argv[1]); prefix, n = sys.argv[2], int(sys.argv[3])
shown, by = sys.argv[4].split(","), [f for f in sys.argv[5].split(",") if f]
ids = r.zrevrange(prefix + ":jobs", 0, -1)
if by:
    pipe = r.pipeline(transaction=False)
    for i in ids:
        pipe.hmget(prefix + ":job:" + i.decode(), by)
    pipe.execute()
pipe = r.pipeline(transaction=False)
for i in ids[:n]:
    pipe.hmget(prefix + ":job:" + i.decode(), shown)
pipe.execute()
"""
FILTER_FIELDS = Filters(states=frozenset({"running"})).fields


def fill(ledger: Ledger, jobs: int, running: int, queued: int) -> None:
    """`jobs` jobs, oldest first: the ended ones, then `running`, then `queued` left QUEUED."""
    for start in range(0, jobs, BATCH):
        ledger.create_many([spec() for _ in range(min(BATCH, jobs - start))])
    ids = [i.decode() for i in ledger.r.zrange(ledger.keys.jobs(), 0, -1)]
    ended = jobs - running - queued
    for job_id in ids[:ended]:
        ledger.transition(job_id, S.FAILED, owner="", reason="bench: ended")
    for job_id in ids[ended : ended + running]:
        assert ledger.claim(job_id, "w1", ttl_s=3600)
        ledger.transition(job_id, S.ALLOCATING, owner="w1", reason="claimed")
        ledger.set_fields(job_id, owner="w1", worker="celery@bench", endpoint=f"gpu-{job_id}")
        ledger.transition(job_id, S.STARTING, owner="w1", reason="session")
        ledger.transition(job_id, S.RUNNING, owner="w1", reason="started")


def colabq_argv() -> list[str]:
    script = Path(sys.executable).parent / "colabq"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "producer.cli"]


def cpu_s() -> float:
    """CPU seconds of this process and its waited-for children (a loaded machine stretches
    wall time far more than this)."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime


def timed(fn: Callable[[], object], runs: int) -> list[tuple[float, float]]:
    """(wall s, CPU s) of each of `runs` calls."""
    out = []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), cpu_s()
        fn()
        out.append((time.perf_counter() - t0, cpu_s() - c0))
    return out


def command(env: dict[str, str], args: list[str], rows: int) -> Callable[[], None]:
    def run() -> None:
        res = subprocess.run(
            [*colabq_argv(), "status", *args], env=env, capture_output=True, text=True, cwd=ROOT
        )
        if res.returncode != 0:
            raise SystemExit(f"colabq status {' '.join(args)} failed:\n{res.stdout}{res.stderr}")
        listed = sum(1 for line in res.stdout.splitlines() if " T4 " in line)
        if listed != rows:
            raise SystemExit(f"colabq status {' '.join(args)} listed {listed}, not {rows}")

    return run


def anchor(r: redis.Redis, keys: Keys, by: tuple[str, ...] = ()) -> None:
    ids: list[bytes] = r.zrevrange(keys.jobs(), 0, -1)  # type: ignore[assignment]
    if by:
        pipe = r.pipeline(transaction=False)
        for i in ids:
            pipe.hmget(keys.job(i.decode()), by)
        pipe.execute()
    pipe = r.pipeline(transaction=False)
    for i in ids[:30]:
        pipe.hmget(keys.job(i.decode()), SUMMARY_FIELDS)
    pipe.execute()


def anchor_process(url: str, prefix: str, by: tuple[str, ...] = ()) -> Callable[[], None]:
    argv = [sys.executable, "-c", ANCHOR, url, prefix, "30", ",".join(SUMMARY_FIELDS),
            ",".join(by)]  # fmt: skip
    return lambda: subprocess.run(argv, check=True)


def fig(xs: list[tuple[float, float]]) -> str:
    ts, cpu = [t for t, _ in xs], [c for _, c in xs]
    return (f"median {statistics.median(ts):.3f} s ({min(ts):.3f}-{max(ts):.3f}); "
            f"CPU {statistics.median(cpu):.3f} s")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--running", type=int, default=300)
    ap.add_argument("--queued", type=int, default=200)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    if args.runs < 3:
        raise SystemExit("--runs: 3 or more (a median with its range)")
    if args.running < 30 or args.running + args.queued > args.jobs:
        raise SystemExit("--running: 30 or more (a full page); --running + --queued <= --jobs")
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    with tempfile.TemporaryDirectory(prefix="colabq-status-bench-") as tmp:
        conf = f'bind 127.0.0.1\nport {port}\nsave ""\nappendonly no\ndir {tmp}\n'
        proc = start_redis_server(conf, url)
        if proc is None:
            raise SystemExit("redis-server is needed (not found, or it did not start)")
        try:
            return bench(url, args.jobs, args.running, args.queued, args.runs, Path(tmp))
        finally:
            proc.kill()
            proc.wait()


def bench(url: str, jobs: int, running: int, queued: int, runs: int, home: Path) -> int:
    prefix = f"colabq-bench-{secrets.token_hex(4)}"
    client = redis.Redis.from_url(url)
    keys = Keys(prefix)
    t0 = time.perf_counter()
    fill(Ledger(client, SystemClock(), keys, log_maxlen=1000), jobs, running, queued)
    print(f"ledger: {jobs} jobs ({running} running, {queued} queued, the rest failed) on a "
          f"private redis-server ({time.perf_counter() - t0:.1f} s to build)")  # fmt: skip
    env = {**os.environ, "COLABQ_REDIS_URL": url, "COLABQ_KEY_PREFIX": prefix,
           "HOME": str(home), "COLUMNS": "80"}  # fmt: skip
    empty = {**env, "COLABQ_KEY_PREFIX": f"{prefix}-empty"}
    results = {
        "colabq status --limit 30": timed(command(env, ["--limit", "30"], 30), runs),
        "colabq status --state running": timed(command(env, ["--state", "running"], 30), runs),
        "anchor: HMGET the 30 shown, in-process": timed(lambda: anchor(client, keys), runs),
        "anchor: + HMGET state of all, in-process": timed(
            lambda: anchor(client, keys, FILTER_FIELDS), runs
        ),
        "anchor: HMGET the 30 shown, fresh process": timed(anchor_process(url, prefix), runs),
        "anchor: + HMGET state of all, fresh process": timed(
            anchor_process(url, prefix, FILTER_FIELDS), runs
        ),
        "colabq status on an empty ledger (start-up)": timed(command(empty, [], 0), runs),
    }
    width = max(len(k) for k in results)
    print(f"{runs} runs each:")
    for name, ts in results.items():
        print(f"  {name:<{width}}  {fig(ts)}")
    worst = max(statistics.median(t for t, _ in results[k]) for k in list(results)[:2])
    load = os.getloadavg()[0]
    print(f"load average (1 min) at the end: {load:.1f} on {os.cpu_count()} CPUs")
    met = worst <= TARGET_S
    print(f"target: median <= {TARGET_S:.1f} s for both commands: {'met' if met else 'NOT met'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
