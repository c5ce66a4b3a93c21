"""Q1: what quotas add to a claim (issue 27): the claim script's round trip for a job whose user
and account have quotas (GPUs, and units a day, week and month, high enough not to refuse) while
`--running` of the user's jobs hold slots, each counted with its units so far, against the same
claim with no quota set, in the same run. Each claimed job is cancelled before the next (its
slots given back, its units summed).

Target: colabq's p50 <= the anchor's p50 + 1 ms.

    .venv/bin/python ops/bench/quota_bench.py [--claims 300] [--running 50] [--runs 3]
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ops.bench.figures import Figure, check_runs, emit
from tests.factories import make_spec
from worker.clock import SystemClock
from worker.quota.limits import Scope, set_quota
from worker.records.claim import Claim, claim_and_start
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.states import JobState

TEAM = "team@example.com"


def claim(ledger: Ledger, job_id: str, owner: str) -> Claim:
    return claim_and_start(
        ledger, job_id, owner, ttl_s=600, worker="w1", owner_host="h:/s", nonce="n",
        wall_deadline_at=time.time() + 3600, account=TEAM,
    ).claim  # fmt: skip


def claims_ms(client: redis.Redis, claims: int, running: int, quotas: bool) -> list[float]:
    prefix = f"bench-quota-{secrets.token_hex(4)}"
    ledger = Ledger(client, SystemClock(), Keys(prefix), log_maxlen=100)
    try:
        if quotas:
            big = {"gpus": 10_000, "units_day": 1e6, "units_week": 1e6, "units_month": 1e6}
            set_quota(client, ledger.keys, Scope("user", "alice"), big, time.time())
            set_quota(client, ledger.keys, Scope("account", TEAM), {"gpus": 10_000}, time.time())
        for i in range(running):
            (job_id, _) = ledger.create(make_spec(run_name=f"hold{i}", submitted_by="alice@x"))
            assert claim(ledger, job_id, f"h{i}") is Claim.CLAIMED
            ledger.set_fields(job_id, owner=f"h{i}", endpoint=f"ep{i}")
        took = []
        for i in range(claims):
            (job_id, _) = ledger.create(make_spec(run_name=f"c{i}", submitted_by="alice@x"))
            t0 = time.perf_counter()
            got = claim(ledger, job_id, f"c{i}")
            took.append((time.perf_counter() - t0) * 1000)
            assert got is Claim.CLAIMED, got
            ledger.transition(job_id, JobState.CANCELLED, owner=f"c{i}", reason="bench")
        return took
    finally:
        for key in client.scan_iter(f"{prefix}:*"):
            client.delete(key)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--claims", type=int, default=300)
    ap.add_argument("--running", type=int, default=50)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = ap.parse_args()
    check_runs(args.runs)
    client = redis.Redis.from_url(args.redis_url)
    with_q: list[float] = []
    without: list[float] = []
    for _ in range(args.runs):
        without.append(statistics.median(claims_ms(client, args.claims, args.running, False)))
        with_q.append(statistics.median(claims_ms(client, args.claims, args.running, True)))
    q, a = statistics.median(with_q), statistics.median(without)
    print(f"claim with quotas, {args.running} running: p50 {q:.3f} ms (runs: {with_q})")
    print(f"claim with no quota: p50 {a:.3f} ms (runs: {without})")
    emit([
        Figure(
            "Q1", f"a claim with user and account quotas, {args.running} running", "ms",
            with_q, without, "the same claim, no quota set", "<= anchor + 1 ms", q <= a + 1.0,
            note="each running job of the user is read to count its units so far",
        )
    ])  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
