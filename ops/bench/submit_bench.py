"""P3: 1,000 specs through the full submit path, in-process; M1: Redis memory per queued job.

colabq: for each of N jobs a `SubmitRequest` (its own run name and env) -> `build_spec` (script
checks, validation, idempotency key) -> `enqueue_many` (all recorded in one atomic step, the
messages over one broker connection), as `colabq submit` does for a sweep after its pre-flight.
The anchor, in the same run: raw Celery `send_task` of the same encoded specs over one
connection (no checks, no ledger). Both on a private redis-server, so that its memory counts only
this: M1 is `used_memory` after the colabq submission, less before, per job (the ledger record,
its indexes and the queued message).

Target P3: colabq's jobs/s >= 0.5x the anchor's.

    .venv/bin/python ops/bench/submit_bench.py [--jobs 1000] [--runs 3]
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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ops.bench.figures import Figure, check_runs, emit  # noqa: E402
from ops.bench.rig import private_redis, raw_send  # noqa: E402
from producer.submit import SubmitRequest, build_spec, enqueue_many  # noqa: E402
from worker.celery_app import build_app  # noqa: E402
from worker.clock import SystemClock  # noqa: E402
from worker.records.keys import Keys  # noqa: E402
from worker.records.ledger import Ledger  # noqa: E402
from worker.settings import Settings  # noqa: E402
from worker.spec import encode_spec  # noqa: E402

SCRIPT = '#!/bin/bash\nset -euo pipefail\npython train.py --epochs 3 --seed "$SEED"\n'
COMMANDS = [0]
_send = AbstractConnection.send_packed_command


def _counting(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
    COMMANDS[0] += 1 if isinstance(command, bytes | str) else len(command)
    _send(self, command, check_health)


def requests(root: Path, jobs: int) -> list[SubmitRequest]:
    script = root / "train.sh"
    script.write_text(SCRIPT)
    store = root / "store"
    store.mkdir(exist_ok=True)
    tag = secrets.token_hex(3)
    return [
        SubmitRequest(
            script=script,
            run_name=f"coco-detr-r50-bs64-lr1e-4-{tag}-seed{i}",
            local_store=store,
            commit="abc1234",
            wall="2h",
            env=[f"SEED={i}"],
        )
        for i in range(jobs)
    ]


def colabq_once(url: str, prefix: str, reqs: list[SubmitRequest]) -> tuple[float, int, list[str]]:
    client = redis.Redis.from_url(url)
    ledger = Ledger(client, SystemClock(), Keys(prefix), log_maxlen=1000)
    app = build_app(Settings(redis_url=url))
    COMMANDS[0] = 0
    AbstractConnection.send_packed_command = _counting  # type: ignore[method-assign]
    try:
        t0 = time.perf_counter()
        specs = [build_spec(r) for r in reqs]
        done = enqueue_many(specs, ledger, app, f"{prefix}.")
        took = time.perf_counter() - t0
    finally:
        AbstractConnection.send_packed_command = _send  # type: ignore[method-assign]
    assert all(e.created for e in done) and len(done) == len(reqs)
    return took, COMMANDS[0], [encode_spec(s) for s in specs]


def used_memory(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    runs, n = check_runs(args.runs), args.jobs
    with private_redis() as (url, tmp):
        client = redis.Redis.from_url(url)
        colabq_s, raw_s, per_job_kb, commands = [], [], [], []
        for run in range(runs):
            reqs = requests(tmp, n)
            client.flushdb()
            before = used_memory(client)
            took, count, payloads = colabq_once(url, f"bench{run}", reqs)
            per_job_kb.append((used_memory(client) - before) / n / 1024)
            colabq_s.append(took)
            commands.append(count / n)
            raw_s.append(raw_send(url, f"raw{run}", payloads))
            print(
                f"run {run + 1}: colabq {took:.3f} s ({count / n:.2f} Redis commands a "
                f"job), raw send_task {raw_s[-1]:.3f} s, {per_job_kb[-1]:.2f} KB a job"
            )
    rate = [n / t for t in colabq_s]
    anchor = [n / t for t in raw_s]
    ratio = statistics.median(rate) / statistics.median(anchor)
    emit([
        Figure(
            "P3", f"{n:,} specs through the submit path, in-process", "jobs/s", rate, anchor,
            "raw send_task", ">= 0.5x anchor", ratio >= 0.5,
            extra={"redis_commands_per_job": statistics.median(commands)},
        ),
        Figure(
            "M1", "Redis memory per queued job (record + message)", "KB", per_job_kb, None, "",
            "(none)", True,
        ),
    ])  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
