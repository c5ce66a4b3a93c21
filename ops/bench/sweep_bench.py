"""A 1,000-job sweep from a job file, through the real `colabq submit` command, on the real Redis.

The job file sweeps `env.SEED` over N values in a training repository the pre-flight passes;
`colabq submit job.yaml` (a subprocess, start-up included) pre-flights and sends the whole sweep
as one request to the gate (`colabq gate`, running beside it), which records and enqueues every
job. The anchor, measured in the same run: raw Celery `send_task` of N messages carrying
the same encoded specs, one connection, in-process (no checks, no ledger, no start-up).
Each figure is the median of --runs runs, with min-max. Target: the sweep in <= 10 s.

    .venv/bin/python ops/bench/sweep_bench.py [--jobs 1000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
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
from ops.bench.rig import raw_send, start_gate  # noqa: E402
from tests.cli.training_repo import QUIET_ENV, make_repo  # noqa: E402

COLABQ = Path(sys.executable).parent / "colabq"


def job_file(root: Path, jobs: int) -> Path:
    repo = make_repo(root / "repo")
    path = root / "job.yaml"
    path.write_text(
        "script: repo/train.sh\n"
        "name: coco-detr-r50-bs64-lr1e-4\n"
        "repo_dir: repo\n"
        "local_store: store\n"
        "commit: abc1234\n"
        "seconds_per_epoch: 600\n"
        "wall: 2h\n"
        f"sweep:\n  env.SEED: {json.dumps(list(range(jobs)))}\n"
    )
    assert repo.is_dir()
    return path


def clean(client: redis.Redis, prefix: str) -> None:
    for key in client.scan_iter(f"{prefix}*"):
        client.delete(key)


def sweep_once(path: Path, env: dict[str, str]) -> tuple[float, list[str]]:
    t0 = time.perf_counter()
    res = subprocess.run(
        [str(COLABQ), "submit", str(path), "--json"], cwd=path.parent, env=env,
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    took = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"colabq submit failed ({res.returncode}): {res.stderr.strip()}")
    data = json.loads(res.stdout.strip().splitlines()[-1])
    return took, [j["job_id"] for j in data["jobs"] if j["created"]]


def fig(xs: list[float], jobs: int) -> str:
    med = statistics.median(xs)
    return f"{med:.2f} s ({jobs / med:,.0f} jobs/s; min {min(xs):.2f}, max {max(xs):.2f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = ap.parse_args()
    check_runs(args.runs)
    client = redis.Redis.from_url(args.redis_url)
    sweep_s: list[float] = []
    raw_s: list[float] = []
    with tempfile.TemporaryDirectory(prefix="colabq-sweep-bench-") as tmp:
        path = job_file(Path(tmp), args.jobs)
        for run in range(args.runs):
            prefix = f"bench-sweep-{secrets.token_hex(4)}"
            env = {k: v for k, v in os.environ.items() if k not in QUIET_ENV}
            env.update(
                COLABQ_REDIS_URL=args.redis_url, COLABQ_KEY_PREFIX=prefix,
                COLABQ_QUEUE_PREFIX=f"{prefix}.", HOME=tmp,
            )  # fmt: skip
            gate = start_gate(env, Path(tmp) / f"gate-{run}.log")
            try:
                took, ids = sweep_once(path, env)
                if len(ids) != args.jobs:
                    raise SystemExit(f"run {run}: {len(ids)} jobs created, not {args.jobs}")
                queue = f"{prefix}.gpu.t4"
                if client.llen(queue) != args.jobs:
                    raise SystemExit(f"run {run}: {client.llen(queue)} messages queued")
                specs = [
                    client.hget(f"{prefix}:job:{i}", "spec") or b"" for i in ids
                ]  # the same payloads, for the anchor
                sweep_s.append(took)
                raw_queue = f"{prefix}.raw"
                raw_s.append(raw_send(args.redis_url, raw_queue, [s.decode() for s in specs]))
            finally:
                gate.terminate()
                gate.wait(30)
                clean(client, prefix)
    n = args.jobs
    print(f"sweep of {n} jobs from a job file (colabq submit, a command): {fig(sweep_s, n)}")
    print(f"anchor: raw Celery send_task of the same {n} specs, in-process: {fig(raw_s, n)}")
    emit([
        Figure(
            "S1", f"a {n:,}-job sweep, `colabq submit job.yaml` as a command", "s", sweep_s,
            raw_s, "raw send_task, in-process", "<= 10 s", statistics.median(sweep_s) <= 10,
            note="the command's time includes its start-up, the pre-flight and validation",
        )
    ])  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
