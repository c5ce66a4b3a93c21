"""P4: enqueue -> ALLOCATING, on an idle worker, against a raw Celery dispatch in the same run.

colabq: a real worker (`celery -A worker.celery_app worker`, default settings, the Colab
emulator) waits on its queue; the bench submits each job as `colabq submit` does (`enqueue`: a
request to the gate, which the worker's gate duty carries out: the job recorded, its message
sent) and reads the time of its ALLOCATING entry in the job's history (the worker's clock: the
same host).
The job then runs to its end (a one-line script) before the next is sent.
The anchor: a plain Celery worker (`ops/bench/dispatch_anchor.py`, the same broker, the library's
defaults) whose task writes the time it starts to Redis; the bench sends it N tasks the same way.
Each run gives a p50 (and p95) over --jobs jobs; the figure is the median of the runs' p50s.

Target: colabq's p50 <= the anchor's p50 + 5 ms.

    .venv/bin/python ops/bench/dispatch_bench.py [--jobs 7] [--runs 3]
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ops.bench.figures import Figure, check_runs, emit  # noqa: E402
from ops.bench.rig import DEFAULT_REDIS_URL, PY, fleet_env, start_worker, tear_down  # noqa: E402
from producer.ask import wait_for_gate  # noqa: E402
from producer.submit import SubmitRequest, build_spec, enqueue  # noqa: E402
from worker.clock import SystemClock  # noqa: E402
from worker.records.keys import Keys  # noqa: E402
from worker.records.ledger import Ledger  # noqa: E402
from worker.settings import Settings  # noqa: E402
from worker.states import TERMINAL, JobState  # noqa: E402

ANCHOR_TASK = "bench.stamp"


def pct(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def wait(what: str, fn: object, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not fn():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"dispatch_bench: {what} did not happen in {timeout_s:.0f} s")
        time.sleep(0.02)


def allocating_at(ledger: Ledger, job_id: str) -> float | None:
    return next((h.at for h in ledger.history(job_id) if h.state is JobState.ALLOCATING), None)


def colabq_latencies(env: dict[str, str], root: Path, jobs: int, run: int) -> list[float]:
    settings = Settings(redis_url=env["COLABQ_REDIS_URL"], key_prefix=env["COLABQ_KEY_PREFIX"])
    ledger = Ledger(
        redis.Redis.from_url(settings.redis_url), SystemClock(), Keys(settings.key_prefix),
        log_maxlen=1000,
    )  # fmt: skip
    assert wait_for_gate(ledger, 60), "the worker's gate never served"
    script = root / "job.sh"
    script.write_text("echo hi\n")
    out: list[float] = []
    for i in range(jobs):
        spec = build_spec(SubmitRequest(
            script=script, run_name=f"bench-dispatch-{run}-{i}", wall="10m",
            local_store=root / "store", commit="abc1234",
        ))  # fmt: skip
        t0 = time.time()
        job_id = enqueue(spec, ledger).job_id
        wait(f"job {job_id} ALLOCATING", lambda: allocating_at(ledger, job_id))  # noqa: B023
        out.append((allocating_at(ledger, job_id) or 0.0) - t0)
        wait(f"job {job_id} ended", lambda: ledger.get(job_id).state in TERMINAL)  # noqa: B023
    return out


def start_anchor(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [PY, "-m", "celery", "-A", "ops.bench.dispatch_anchor", "worker", "-Q",
             env["BENCH_ANCHOR_QUEUE"], "-c", "1", "-n", f"anchor-{secrets.token_hex(3)}@%h",
             "-l", "INFO"],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT,
        )  # fmt: skip
    wait("the anchor worker's start", lambda: b"ready." in log.read_bytes(), 60)
    return proc


def anchor_latencies(env: dict[str, str], jobs: int) -> list[float]:
    from celery import Celery

    client = redis.Redis.from_url(env["COLABQ_REDIS_URL"])
    app = Celery("bench-anchor", broker=env["COLABQ_REDIS_URL"])
    out: list[float] = []
    for _ in range(jobs):
        key = f"{env['COLABQ_KEY_PREFIX']}:anchor:{secrets.token_hex(4)}"
        t0 = time.time()
        app.send_task(ANCHOR_TASK, args=[key], queue=env["BENCH_ANCHOR_QUEUE"])
        wait("the anchor task", lambda: client.exists(key))  # noqa: B023
        out.append(float(client.get(key) or 0) - t0)
        time.sleep(0.3)  # as idle as the colabq worker between jobs
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=7)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--redis-url", default=DEFAULT_REDIS_URL)
    args = ap.parse_args()
    runs = check_runs(args.runs)
    root = Path(tempfile.mkdtemp(prefix="colabq-dispatch-bench-"))
    (root / "store").mkdir()
    env = fleet_env(root, args.redis_url)
    env["BENCH_ANCHOR_QUEUE"] = f"{env['COLABQ_KEY_PREFIX']}.anchor"
    worker = start_worker(env, root / "worker.log")
    anchor = start_anchor(env, root / "anchor.log")
    p50, p95, a50, a95 = [], [], [], []
    try:
        for run in range(runs):
            ours = colabq_latencies(env, root, args.jobs, run)
            raw = anchor_latencies(env, args.jobs)
            p50.append(pct(ours, 0.5) * 1000)
            p95.append(pct(ours, 0.95) * 1000)
            a50.append(pct(raw, 0.5) * 1000)
            a95.append(pct(raw, 0.95) * 1000)
            print(f"run {run + 1}: colabq p50 {p50[-1]:.1f} ms, p95 {p95[-1]:.1f} ms; "
                  f"raw dispatch p50 {a50[-1]:.1f} ms, p95 {a95[-1]:.1f} ms")  # fmt: skip
    finally:
        tear_down(env, root, worker, anchor)
    over = statistics.median(p50) - statistics.median(a50)
    emit([
        Figure(
            "P4", "enqueue -> ALLOCATING, p50", "ms", p50, a50, "raw Celery dispatch",
            "<= anchor + 5 ms", over <= 5.0,
            extra={"p95_ms": statistics.median(p95), "anchor_p95_ms": statistics.median(a95)},
        ),
    ])  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
