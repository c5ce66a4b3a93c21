"""P2: GPU-seconds held after the job ends when its worker is SIGKILLed, or its whole host lost.

A real worker with the default settings (30 s lease, 15 s watchdog poll, 90 s watchdog
staleness, 30 s release hold) runs a job of `--job-s` seconds on the Colab emulator. A third of
the way in:
  worker  the worker's process group is SIGKILLed (its watchdog and attach client live on);
  host    the worker and every process of its state dir are SIGKILLed (watchdog, clients).
Nothing restarts the worker. A janitor runs `colabq janitor --act` every `--interval` seconds
(beat's default: 60) from another state dir, as a beat host would.

  held = unassigned_at (the emulator's billing of the VM) - T1 (the job script's own clock at
  its end, from the job log in the store). Bounds: worker <= 30 s, host <= 60 s.
Work lost: the job must end SUCCEEDED with exit code 0 and its last line in the store.

    .venv/bin/python ops/bench/loss_bench.py [--scenario worker|host|both] [--job-s 60] [--runs 3]

The runs of both scenarios go side by side (each its own worker, emulator and key prefix).
Verdict: every run within its bound (the max, not the median) and no work lost.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from idle_bench import billed_seconds, colabq

from ops.bench.figures import Figure, check_runs, emit
from ops.bench.rig import DEFAULT_REDIS_URL, ROOT, fleet_env, start_worker
from ops.chaos.env import kill_processes_mentioning

BOUND_S = {"worker": 30.0, "host": 60.0}


def job_script(job_s: int) -> str:
    return (
        "python3 -c 'import time; print(\"BENCH_T0=%f\" % time.time())'\n"
        f'for i in $(seq 1 {job_s}); do echo "step $i"; sleep 1; done\n'
        "python3 -c 'import time; print(\"BENCH_T1=%f\" % time.time())'\n"
    )


def run(scenario: str, job_s: int, interval_s: float, redis_url: str) -> tuple[float, str]:
    root = Path(tempfile.mkdtemp(prefix=f"colabq-loss-{scenario}-"))
    env = fleet_env(root, redis_url)
    tag = secrets.token_hex(3)
    beat = {**env, "COLABQ_STATE_DIR": str(root / "beat-state"), "HOME": str(root / "beat-home")}
    (root / "beat-home").mkdir()
    worker = start_worker(env, root / "worker.log")
    try:
        script = root / "job.sh"
        script.write_text(job_script(job_s))
        out = colabq(
            env, "submit", str(script), "--name", f"bench-loss-{scenario}-{tag}", "--wall", "30m",
            "--local-store", str(root / "store"), "--json", "--waive", "config-diff",
            "--waive", "paths", "--waive", "monitoring",
        )  # fmt: skip
        job_id = json.loads(out)["jobs"][0]["job_id"]
        time.sleep(job_s / 3 + 10)  # allocation and start take a few seconds
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
        if scenario == "host":
            kill_processes_mentioning(str(root / "state"))
        print(f"  {scenario}: killed at +{job_s / 3 + 10:.0f} s; janitor every {interval_s:.0f} s")
        deadline = time.monotonic() + job_s + 600
        next_pass = time.monotonic()
        while True:
            rec = json.loads(colabq(env, "status", job_id, "--json"))
            if rec.get("state") in ("succeeded", "failed", "failed_lost", "cancelled",
                                    "timed_out", "vm_lost"):  # fmt: skip
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"job {job_id} still {rec.get('state')}")
            if time.monotonic() >= next_pass:
                colabq(beat, "janitor", "--act", "--json")
                next_pass += interval_s
            time.sleep(1)
        log = (
            root / "store" / f"bench-loss-{scenario}-{tag}" / "logs" / job_id / "job.log"
        ).read_text()
        t1 = float(re.search(r"BENCH_T1=([0-9.]+)", log)[1])  # type: ignore[index]
        endpoint = str(rec.get("endpoint"))
        billed_seconds(root / "emulator", endpoint)  # waits for the record
        lines = (root / "emulator" / "billing.jsonl").read_text().splitlines()
        billing = [json.loads(x) for x in lines]
        [mine] = [b for b in billing if b["endpoint"] == endpoint]
        held = float(mine["unassigned_at"]) - t1
        state = f"{rec.get('state')}, exit {rec.get('exit_code')}"
        return held, state
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGKILL)
        subprocess.run([str(ROOT / "ops" / "colab-emu"), "kill-all"], env=env, capture_output=True)
        kill_processes_mentioning(str(root))
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", choices=("worker", "host", "both"), default="both")
    p.add_argument("--job-s", type=int, default=60)
    p.add_argument("--interval", type=float, default=60.0)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--redis-url", default=DEFAULT_REDIS_URL)
    a = p.parse_args()
    runs = check_runs(a.runs)
    scenarios = ("worker", "host") if a.scenario == "both" else (a.scenario,)
    # Every run of every scenario side by side: each has its own worker, emulator and prefix,
    # and what they measure is waiting (leases, polls, the janitor), not CPU.
    with ThreadPoolExecutor(max_workers=len(scenarios) * runs) as pool:
        futures = {
            (scenario, i): pool.submit(run, scenario, a.job_s, a.interval, a.redis_url)
            for scenario in scenarios
            for i in range(runs)
        }
        results = {key: f.result() for key, f in futures.items()}
    figs = []
    for scenario in scenarios:
        held = [results[(scenario, i)][0] for i in range(runs)]
        states = [results[(scenario, i)][1] for i in range(runs)]
        lost = sum(1 for st in states if st != "succeeded, exit 0")
        for i, (h, st) in enumerate(zip(held, states, strict=True)):
            print(f"P2 {scenario} run {i + 1}: {st}; GPU held {h:.1f} s after the job's end")
        bound = BOUND_S[scenario]
        what = "worker SIGKILLed" if scenario == "worker" else "host lost"
        figs.append(
            Figure(
                f"P2{'a' if scenario == 'worker' else 'b'}",
                f"GPU held after the job's end, {what}; {lost} of {runs} runs lost work",
                "s", held, None, "seed: 180 s idle stop", f"<= {bound:.0f} s, 0 work lost",
                max(held) <= bound and lost == 0,
                extra={"work_lost_runs": float(lost)},
            )
        )  # fmt: skip
    emit(figs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
