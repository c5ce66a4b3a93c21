"""P1: billed GPU-seconds per job beyond the job's own run, from the Colab emulator's billing.

Jobs go the way a user's do: `colabq submit` -> a real Celery worker (default settings) -> the
Colab emulator -> a local store. For each job:
  billed = unassigned_at - assigned_at     (the emulator's billing record of its VM)
  run    = T1 - T0                         (the job script's own clock, first and last line)
  P1     = billed - run                    (allocation, uploads, start, end, final sync, stop)
Target: median <= 1 s. Runs in any checkout of colabq that has `ops/colab` with billing (to
measure an older commit, copy this file and ops/colab_emulator into it).

    .venv/bin/python ops/bench/idle_bench.py [--jobs 5] [--redis-url redis://127.0.0.1:6379/11]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from producer import exitcodes  # noqa: E402

EMULATOR = ROOT / "ops" / "colab"
PY = sys.executable
JOB = (
    "python3 -c 'import time; print(\"BENCH_T0=%f\" % time.time())'\n"
    "sleep 1\n"
    "python3 -c 'import time; print(\"BENCH_T1=%f\" % time.time())'\n"
)


def start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    queue = f"{env['COLABQ_QUEUE_PREFIX']}gpu.t4"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [PY, "-m", "celery", "-A", "worker.celery_app", "worker", "-Q", queue, "-c", "1",
             "-n", f"bench-{secrets.token_hex(3)}@%h", "-l", "INFO"],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT,
        )  # fmt: skip
    deadline = time.monotonic() + 60
    while b"ready." not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the worker did not start:\n{log.read_text()[-2000:]}")
        time.sleep(0.1)
    return proc


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


def one_job(env: dict[str, str], root: Path, i: int) -> tuple[float, float]:
    script = root / f"job{i}.sh"
    script.write_text(JOB)
    out = colabq(
        env, "submit", str(script), "--name", f"bench-idle-{i}", "--wall", "10m", "--local-store",
        str(root / "store"), "--json", "--waive", "config-diff", "--waive", "paths",
        "--waive", "monitoring",
    )  # fmt: skip
    job_id = json.loads(out)["job_id"]
    rec = wait_terminal(env, job_id)
    if rec.get("state") != "succeeded":
        raise SystemExit(f"bench job {job_id} ended {rec.get('state')}: {rec.get('reason')}")
    log = (root / "store" / f"bench-idle-{i}" / "logs" / job_id / "job.log").read_text()
    t0 = float(re.search(r"BENCH_T0=([0-9.]+)", log)[1])  # type: ignore[index]
    t1 = float(re.search(r"BENCH_T1=([0-9.]+)", log)[1])  # type: ignore[index]
    endpoint = str(
        rec.get("endpoint") or json.loads(str(rec.get("report") or "{}")).get("endpoint")
    )
    billed = billed_seconds(Path(env["COLAB_EMU_HOME"]), endpoint)
    return billed, t1 - t0


def billed_seconds(emu_home: Path, endpoint: str) -> float:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            lines = (emu_home / "billing.jsonl").read_text().splitlines()
        except FileNotFoundError:
            lines = []
        for line in lines:
            rec = json.loads(line)
            if rec["endpoint"] == endpoint:
                return float(rec["unassigned_at"]) - float(rec["assigned_at"])
        time.sleep(0.1)
    raise SystemExit(f"no billing record for {endpoint}")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=int, default=5)
    p.add_argument(
        "--redis-url", default=os.environ.get("COLABQ_BENCH_REDIS_URL", "redis://127.0.0.1:6379/11")
    )
    a = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="colabq-idle-bench-"))
    (root / "home").mkdir()
    prefix = f"colabq-bench-{secrets.token_hex(4)}"
    env = {
        **os.environ,
        "COLABQ_REDIS_URL": a.redis_url,
        "COLABQ_KEY_PREFIX": prefix,
        "COLABQ_QUEUE_PREFIX": f"{prefix}.",
        "COLABQ_STATE_DIR": str(root / "state"),
        "COLABQ_COLAB_BIN": str(EMULATOR),
        "COLAB_EMU_HOME": str(root / "emulator"),
        "HOME": str(root / "home"),
        "PATH": f"{Path(PY).parent}:{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
    }
    worker = start_worker(env, root / "worker.log")
    p1: list[float] = []
    try:
        for i in range(a.jobs):
            billed, run = one_job(env, root, i)
            p1.append(billed - run)
            print(f"job {i + 1}: billed {billed:.3f} s, own run {run:.3f} s, beyond {p1[-1]:.3f} s")
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)
        subprocess.run([str(ROOT / "ops" / "colab-emu"), "kill-all"], env=env, capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"P1 billed GPU-seconds beyond the job's own run: median {statistics.median(p1):.3f} s "
        f"(min {min(p1):.3f}, max {max(p1):.3f}) over {a.jobs} jobs (target <= 1 s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
