"""P1: billed GPU-seconds per job beyond the job's own run, from the Colab emulator's billing.

Jobs go the way a user's do: `colabq submit` -> a real Celery worker (default settings) -> the
Colab emulator -> a local store. For each job:
  billed = unassigned_at - assigned_at     (the emulator's billing record of its VM)
  run    = T1 - T0                         (the job script's own clock, first and last line)
  P1     = billed - run                    (allocation, uploads, start, end, final sync, stop)
Target: median <= 1 s. Runs in any checkout of colabq that has `ops/colab` with billing (to
measure an older commit, copy this file and ops/colab_emulator into it).

    .venv/bin/python ops/bench/idle_bench.py [--runs 5] [--redis-url redis://127.0.0.1:6379/11]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from ops.bench.figures import Figure, check_runs, emit  # noqa: E402
from ops.bench.rig import (  # noqa: E402
    DEFAULT_REDIS_URL,
    PY,
    fleet_env,
    start_worker,
    tear_down,
)
from producer import exitcodes  # noqa: E402

JOB = (
    "python3 -c 'import time; print(\"BENCH_T0=%f\" % time.time())'\n"
    "sleep 1\n"
    "python3 -c 'import time; print(\"BENCH_T1=%f\" % time.time())'\n"
)


BAD_STATUS = (exitcodes.BAD_INPUT, exitcodes.REDIS_UNREACHABLE, exitcodes.NO_SUCH_JOB)


def colabq(env: dict[str, str], *args: str) -> str:
    res = subprocess.run(
        [PY, "-m", "producer.cli", *args], env=env, capture_output=True, text=True, cwd=ROOT
    )
    # `status JOB` exits with the job's outcome (producer/exitcodes.py): its JSON is the answer.
    ok = res.returncode == 0 or (args[0] == "status" and res.returncode not in BAD_STATUS)
    if not ok:
        raise SystemExit(f"colabq {' '.join(args)} failed:\n{res.stdout}{res.stderr}")
    return res.stdout


def wait_terminal(env: dict[str, str], job_id: str, timeout_s: float = 120) -> dict[str, object]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rec = json.loads(colabq(env, "status", job_id, "--json"))
        if rec.get("state") in ("succeeded", "failed", "failed_lost", "cancelled", "timed_out"):
            return dict(rec)
        time.sleep(0.5)
    raise SystemExit(f"job {job_id} did not end in {timeout_s}s")


def one_job(env: dict[str, str], root: Path, i: int) -> tuple[float, float, float]:
    """(billed, the job's own run, billed before its first line) of one job, in seconds."""
    script = root / f"job{i}.sh"
    script.write_text(JOB)
    out = colabq(
        env, "submit", str(script), "--name", f"bench-idle-{i}", "--wall", "10m", "--local-store",
        str(root / "store"), "--json", "--waive", "config-diff", "--waive", "paths",
        "--waive", "monitoring",
    )  # fmt: skip
    job_id = json.loads(out)["jobs"][0]["job_id"]
    rec = wait_terminal(env, job_id)
    if rec.get("state") != "succeeded":
        raise SystemExit(f"bench job {job_id} ended {rec.get('state')}: {rec.get('reason')}")
    log = (root / "store" / f"bench-idle-{i}" / "logs" / job_id / "job.log").read_text()
    t0 = float(re.search(r"BENCH_T0=([0-9.]+)", log)[1])  # type: ignore[index]
    t1 = float(re.search(r"BENCH_T1=([0-9.]+)", log)[1])  # type: ignore[index]
    endpoint = str(
        rec.get("endpoint") or json.loads(str(rec.get("report") or "{}")).get("endpoint")
    )
    assigned, unassigned = billing_record(Path(env["COLAB_EMU_HOME"]), endpoint)
    return unassigned - assigned, t1 - t0, t0 - assigned


def billed_seconds(emu_home: Path, endpoint: str) -> float:
    assigned, unassigned = billing_record(emu_home, endpoint)
    return unassigned - assigned


def billing_record(emu_home: Path, endpoint: str) -> tuple[float, float]:
    """(assigned_at, unassigned_at) of `endpoint` in the emulator's billing, once written."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            lines = (emu_home / "billing.jsonl").read_text().splitlines()
        except FileNotFoundError:
            lines = []
        for line in lines:
            rec = json.loads(line)
            if rec["endpoint"] == endpoint:
                return float(rec["assigned_at"]), float(rec["unassigned_at"])
        time.sleep(0.1)
    raise SystemExit(f"no billing record for {endpoint}")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=5, help="jobs, one after another (>= 3)")
    p.add_argument("--redis-url", default=DEFAULT_REDIS_URL)
    a = p.parse_args()
    runs = check_runs(a.runs)
    root = Path(tempfile.mkdtemp(prefix="colabq-idle-bench-"))
    env = fleet_env(root, a.redis_url)
    worker = start_worker(env, root / "worker.log")
    p1: list[float] = []
    try:
        for i in range(runs):
            billed, run, before = one_job(env, root, i)
            p1.append(billed - run)
            print(
                f"job {i + 1}: billed {billed:.3f} s, own run {run:.3f} s, beyond {p1[-1]:.3f} s "
                f"({before:.3f} s before its first line, {p1[-1] - before:.3f} s after its last)"
            )
    finally:
        tear_down(env, root, worker)
    emit([
        Figure(
            "P1", "billed GPU-seconds per job beyond its own run", "s", p1, None,
            "(none: 0 is the floor)", "<= 1 s", statistics.median(p1) <= 1.0,
            note="billed = the emulator's unassigned_at - assigned_at; own run = the job "
            "script's first to last line",
        )
    ])  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
