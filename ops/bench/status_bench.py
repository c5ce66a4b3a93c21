"""P6 and P6b: `colabq status` as a user types it, on an empty ledger and on 10,000 jobs,
against plain redis-py doing the same reads in a fresh process, in the same run.

A private redis-server (a free port, no persistence) is filled through the real ledger
(`Ledger.create_many` in batches), then with real transitions: by default the oldest jobs
ended (FAILED), 300 RUNNING (the endpoint recorded as `colab new` returns) and the newest 200
still QUEUED, as a ledger that keeps 30 days of jobs is; `--queued 9700` makes every job live
(the worst case of a filter on live states). Then, --runs times each (a new process each time,
after one untimed round), with the wall time and the CPU seconds it took (a machine loaded by
others stretches wall time far more than CPU time):
- P6: `colabq status` on an empty ledger (start-up and one read); anchor: a fresh Python
  process that imports redis-py and reads the same (ZREVRANGE of the jobs index: empty);
- P6b: `colabq status --limit 30` on the 10,000 jobs; anchor: a fresh process that reads the
  index, then HMGETs the summary fields of the 30 shown, pipelined;
and, printed beside them: `colabq status --state running` and its anchor (the filter's field
of every job first), and both anchors' reads in this process. The note of P6 names what the
command's start-up imports (`python -X importtime`, by package).

The commands and the anchors run from an install without development extras
(`rig.runtime_python`, as `make demo` and a user have it), with a bytecode cache of their own
(PYTHONPYCACHEPREFIX in a temporary folder, filled by the untimed round), as an installed colabq
runs. Targets: P6
median <= 0.25 s, P6b median <= 1 s. Exits 0 whether or not they are met; non-zero only when it
could not measure (no redis-server, a command that failed or listed the wrong rows).

    .venv/bin/python ops/bench/status_bench.py [--jobs 10000] [--running 300] [--queued 200]
        [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import secrets
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

from janitor_bench import spec  # noqa: E402 (the same jobs as the janitor bench)
from preflight_bench import describe, heaviest_imports  # noqa: E402

from ops.bench.figures import Figure, check_runs, emit  # noqa: E402
from ops.bench.rig import private_redis, runtime_python  # noqa: E402
from producer.joblist import SUMMARY_FIELDS, Filters  # noqa: E402
from worker.clock import SystemClock  # noqa: E402
from worker.records.keys import Keys  # noqa: E402
from worker.records.ledger import Ledger  # noqa: E402
from worker.states import JobState as S  # noqa: E402

BATCH = 500
EMPTY_TARGET_S = 0.25
LIST_TARGET_S = 1.0

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
    """`colabq` as a user's install has it: without development extras (`rig.runtime_python`)."""
    return [str(runtime_python().parent / "colabq")]


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


def command(env: Mapping[str, str], args: list[str], rows: int) -> Callable[[], None]:
    def run() -> None:
        res = subprocess.run(
            [*colabq_argv(), "status", *args], env=dict(env), capture_output=True, text=True,
            cwd=ROOT,
        )  # fmt: skip
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


def anchor_process(
    env: Mapping[str, str], url: str, prefix: str, by: tuple[str, ...] = ()
) -> Callable[[], None]:
    argv = [str(runtime_python()), "-c", ANCHOR, url, prefix, "30", ",".join(SUMMARY_FIELDS),
            ",".join(by)]  # fmt: skip
    return lambda: subprocess.run(argv, env=dict(env), check=True)


def line(name: str, xs: list[tuple[float, float]], width: int) -> str:
    ts, cpu = [t for t, _ in xs], [c for _, c in xs]
    return (f"  {name:<{width}}  median {statistics.median(ts):.3f} s "
            f"({min(ts):.3f}-{max(ts):.3f}); CPU {statistics.median(cpu):.3f} s")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--running", type=int, default=300)
    ap.add_argument("--queued", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    runs = check_runs(args.runs)
    if args.running < 30 or args.running + args.queued > args.jobs:
        raise SystemExit("--running: 30 or more (a full page); --running + --queued <= --jobs")
    with private_redis() as (url, home):
        return bench(url, args.jobs, args.running, args.queued, runs, home)


def bench(url: str, jobs: int, running: int, queued: int, runs: int, home: Path) -> int:
    prefix = f"colabq-bench-{secrets.token_hex(4)}"
    client = redis.Redis.from_url(url)
    keys = Keys(prefix)
    t0 = time.perf_counter()
    fill(Ledger(client, SystemClock(), keys, log_maxlen=1000), jobs, running, queued)
    print(f"ledger: {jobs} jobs ({running} running, {queued} queued, the rest failed) on a "
          f"private redis-server ({time.perf_counter() - t0:.1f} s to build)")  # fmt: skip
    # Only the two settings the command reads, as a user who set them; a bytecode cache.
    base = {k: v for k, v in os.environ.items()
            if not k.upper().startswith("COLABQ_") and k != "PYTHONDONTWRITEBYTECODE"}  # fmt: skip
    base.update(HOME=str(home), COLUMNS="80", PYTHONPYCACHEPREFIX=str(home / "pycache"))
    env = {**base, "COLABQ_REDIS_URL": url, "COLABQ_KEY_PREFIX": prefix}
    empty = {**env, "COLABQ_KEY_PREFIX": f"{prefix}-empty"}
    cases = {
        "colabq status, empty ledger": command(empty, [], 0),
        "anchor: fresh process, empty ledger": anchor_process(base, url, f"{prefix}-empty"),
        "colabq status --limit 30": command(env, ["--limit", "30"], 30),
        "anchor: fresh process, the 30 shown": anchor_process(base, url, prefix),
        "colabq status --state running": command(env, ["--state", "running"], 30),
        "anchor: fresh process, + state of all": anchor_process(base, url, prefix, FILTER_FIELDS),
        "anchor: the 30 shown, in this process": lambda: anchor(client, keys),
        "anchor: + state of all, in this process": lambda: anchor(client, keys, FILTER_FIELDS),
    }
    for fn in cases.values():  # untimed: the bytecode cache filled, Redis warm
        fn()
    results = {name: timed(fn, runs) for name, fn in cases.items()}
    width = max(len(k) for k in results)
    print(f"{runs} runs each:")
    for name, xs in results.items():
        print(line(name, xs, width))
    imports = heaviest_imports(
        [*colabq_argv(), "status"], empty, ROOT, python=str(runtime_python())
    )
    print(f"  colabq status, empty ledger: {describe(imports)}")
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")

    def walls(name: str) -> list[float]:
        return [t for t, _ in results[name]]

    def cpu(name: str) -> float:
        return statistics.median(c for _, c in results[name])

    empty_s, page_s = walls("colabq status, empty ledger"), walls("colabq status --limit 30")
    emit([
        Figure(
            "P6", "`colabq status`, empty ledger", "s", empty_s,
            walls("anchor: fresh process, empty ledger"),
            "plain redis-py, fresh process, same reads", f"<= {EMPTY_TARGET_S} s",
            statistics.median(empty_s) <= EMPTY_TARGET_S, note=describe(imports),
            extra={"cpu_s": cpu("colabq status, empty ledger"), "imports_s": imports[0][1]},
        ),
        Figure(
            "P6b", f"`colabq status --limit 30`, {jobs // 1000}k jobs", "s", page_s,
            walls("anchor: fresh process, the 30 shown"),
            "plain redis-py, fresh process, the 30 shown", f"<= {LIST_TARGET_S:g} s",
            statistics.median(page_s) <= LIST_TARGET_S,
            extra={"cpu_s": cpu("colabq status --limit 30"),
                   "state_running_s": statistics.median(walls("colabq status --state running")),
                   "state_running_anchor_s": statistics.median(
                       walls("anchor: fresh process, + state of all"))},
        ),
    ])  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
