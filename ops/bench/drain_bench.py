"""F1, F2: a worker host that breaks is drained fast, and no job is lost to it.

Two real Celery workers on the Colab emulator share a queue; the second host's Colab login then
expires (every authenticated call of its CLI answers 401, the emulator's `auth` fault for its
HOME only) and a batch of jobs is submitted at once:
  F1 = when the broken worker's drain is recorded - when its login broke   (target <= 30 s),
       with the failed attempts it made before it drained                  (target <= 2)
  F2 = jobs of the batch that did not end SUCCEEDED                         (target 0)

    .venv/bin/python ops/bench/drain_bench.py [--runs 3] [--jobs 6]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from ops.bench.figures import Figure, check_runs, emit
from ops.bench.idle_bench import colabq, wait_terminal
from ops.bench.rig import DEFAULT_REDIS_URL, ROOT, fleet_env, start_worker, tear_down

WAIVE = ("--waive", "config-diff", "--waive", "paths", "--waive", "monitoring")


def one_run(redis_url: str, jobs: int) -> tuple[float, int, int]:
    """(seconds from the login breaking to the drain, attempts the broken worker made, jobs
    that did not succeed)."""
    root = Path(tempfile.mkdtemp(prefix="colabq-drain-bench-"))
    env = fleet_env(root, redis_url)
    (root / "host2" / "home").mkdir(parents=True)
    env2 = {**env, "HOME": str(root / "host2" / "home"),
            "COLABQ_STATE_DIR": str(root / "host2" / "state")}  # fmt: skip
    healthy = start_worker(env, root / "worker1.log")
    broken = start_worker(env2, root / "worker2.log")
    client = redis.Redis.from_url(redis_url)
    try:
        fault = json.dumps({"fail": True, "mode": "http", "match_home": env2["HOME"]})
        subprocess.run([str(ROOT / "ops" / "colab-emu"), "faults", "set", "auth", fault],
                       env=env, check=True, capture_output=True)  # fmt: skip
        broke_at = time.time()
        script = root / "job.sh"
        script.write_text("echo trained\n")
        ids = []
        for i in range(jobs):
            out = colabq(env, "submit", str(script), "--name", f"bench-drain-{i}", "--wall",
                         "10m", "--local-store", str(root / "store"), "--json", *WAIVE)  # fmt: skip
            ids.append(json.loads(out)["jobs"][0]["job_id"])
        health_keys = f"{env['COLABQ_KEY_PREFIX']}:worker:*:health"
        deadline = time.monotonic() + 120
        drained_at = None
        while drained_at is None and time.monotonic() < deadline:
            for key in client.scan_iter(health_keys):
                raw = client.get(key)
                if raw:
                    drained_at = float(json.loads(raw)["since"])
            time.sleep(0.05)
        ends = [wait_terminal(env, j, timeout_s=300) for j in ids]
        lost = sum(1 for e in ends if e.get("state") != "succeeded")
        attempts = sum(len(e.get("put_back") or []) for e in ends)
    finally:
        tear_down(env, root, healthy, broken)
    if drained_at is None:
        raise SystemExit("the broken worker was never drained")
    return drained_at - broke_at, attempts, lost


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--jobs", type=int, default=6)
    p.add_argument("--redis-url", default=DEFAULT_REDIS_URL)
    a = p.parse_args()
    runs = check_runs(a.runs)
    secs, attempts, lost = [], [], []
    for i in range(runs):
        s, n, k = one_run(a.redis_url, a.jobs)
        secs.append(s)
        attempts.append(float(n))
        lost.append(float(k))
        print(f"run {i + 1}: drained {s:.2f} s after the login broke, after {n} attempt(s); "
              f"{k} of {a.jobs} jobs not SUCCEEDED")  # fmt: skip
    emit([
        Figure(
            "F1", "a broken host: its login breaking to its drain", "s", secs, None,
            "(none)", "<= 30 s, <= 2 failed attempts",
            max(secs) <= 30 and max(attempts) <= 2,
            note=f"failed attempts before the drain: {statistics.median(attempts):g} "
            f"(max {max(attempts):g})",
            extra={"attempts_max": max(attempts)},
        ),
        Figure(
            "F2", f"jobs lost to a broken host ({a.jobs} jobs, 2 workers)", "jobs", lost, None,
            "(none)", "0", max(lost) == 0,
        ),
    ])  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
