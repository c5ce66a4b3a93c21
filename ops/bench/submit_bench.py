"""P3: 1,000 specs through the full submit path, through the gate; M1: Redis memory per queued job.

colabq: for each of N jobs a `SubmitRequest` (its own run name and env) -> `build_spec` (script
checks, validation, idempotency key) -> `enqueue_many`: one request to the gate (`colabq gate`,
a process of its own, as a deployment runs it), which validates the batch, records every job in
one atomic step and sends the messages in one pipeline, then answers; as `colabq submit` does for
a sweep after its pre-flight. The anchor, in the same run: raw Celery `send_task` of the same
encoded specs over one connection (no checks, no ledger). Both on a private redis-server, so that
its memory counts only this: M1 is `used_memory` after the colabq submission, less before, per
job (the ledger record, its indexes and the queued message). The commands a job are the server's
(`INFO commandstats`): the client's and the gate's together. G1: the same gate left idle for
IDLE_S afterwards, the commands the server ran a second (its blocking reads, its lease, the list
of users).

Target P3: colabq's jobs/s >= 0.9x the anchor's. G1: about one command a second (<= 2).

    .venv/bin/python ops/bench/submit_bench.py [--jobs 1000] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ops.bench.figures import Figure, check_runs, emit  # noqa: E402
from ops.bench.rig import private_redis, raw_send, start_gate  # noqa: E402
from producer.submit import SubmitRequest, build_spec, enqueue_many  # noqa: E402
from worker.clock import SystemClock  # noqa: E402
from worker.records.keys import Keys  # noqa: E402
from worker.records.ledger import Ledger  # noqa: E402
from worker.spec import encode_spec  # noqa: E402

SCRIPT = '#!/bin/bash\nset -euo pipefail\npython train.py --epochs 3 --seed "$SEED"\n'


def total_calls(client: redis.Redis) -> int:
    """Every command the server ran so far (all clients)."""
    return sum(int(v["calls"]) for v in client.info("commandstats").values())


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


IDLE_S = 10.0


def colabq_once(
    url: str, prefix: str, reqs: list[SubmitRequest], root: Path
) -> tuple[float, int, list[str], float]:
    client = redis.Redis.from_url(url)
    ledger = Ledger(client, SystemClock(), Keys(prefix), log_maxlen=1000)
    env = {**os.environ, "COLABQ_REDIS_URL": url, "COLABQ_KEY_PREFIX": prefix,
           "COLABQ_QUEUE_PREFIX": f"{prefix}.", "HOME": str(root)}  # fmt: skip
    gate = start_gate(env, root / f"gate-{prefix}.log")
    try:
        ledger.identity  # noqa: B018 - who this client is: asked once per process, not timed
        before = total_calls(client)
        t0 = time.perf_counter()
        specs = [build_spec(r) for r in reqs]
        done = enqueue_many(specs, ledger).jobs
        took = time.perf_counter() - t0
        calls = total_calls(client) - before - 1  # less the second INFO
        idle_from = total_calls(client)
        time.sleep(IDLE_S)  # the gate alone, idle
        idle_per_s = (total_calls(client) - idle_from - 1) / IDLE_S
    finally:
        gate.terminate()
        gate.wait(30)
    assert all(e.created for e in done) and len(done) == len(reqs)
    sent = [ledger.get(e.job_id).spec for e in done]
    return took, calls, [encode_spec(s) for s in sent], idle_per_s


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
        colabq_s, raw_s, per_job_kb, commands, idle = [], [], [], [], []
        for run in range(runs):
            reqs = requests(tmp, n)
            client.flushdb()
            before = used_memory(client)
            took, count, payloads, idle_per_s = colabq_once(url, f"bench{run}", reqs, tmp)
            idle.append(idle_per_s)
            per_job_kb.append((used_memory(client) - before) / n / 1024)
            colabq_s.append(took)
            commands.append(count / n)
            raw_s.append(raw_send(url, f"raw{run}", payloads))
            print(
                f"run {run + 1}: colabq {took:.3f} s ({count / n:.2f} Redis commands a "
                f"job), raw send_task {raw_s[-1]:.3f} s, {per_job_kb[-1]:.2f} KB a job; the "
                f"gate idle: {idle_per_s:.2f} commands a second"
            )
    rate = [n / t for t in colabq_s]
    anchor = [n / t for t in raw_s]
    ratio = statistics.median(rate) / statistics.median(anchor)
    emit([
        Figure(
            "P3", f"{n:,} specs through the submit path and the gate", "jobs/s", rate, anchor,
            "raw send_task", ">= 0.9x anchor", ratio >= 0.9,
            extra={"redis_commands_per_job": statistics.median(commands)},
        ),
        Figure(
            "M1", "Redis memory per queued job (record + message)", "KB", per_job_kb, None, "",
            "(none)", True,
        ),
        Figure(
            "G1", "an idle gate's Redis commands a second", "/s", idle, None, "", "<= 2",
            statistics.median(idle) <= 2,
        ),
    ])  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
