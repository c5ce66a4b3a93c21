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

    .venv/bin/python ops/bench/loss_bench.py [--scenario worker|host|both] [--job-s 120]
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from idle_bench import EMULATOR, PY, ROOT, billed_seconds, colabq, start_worker

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
    prefix = f"colabq-bench-{secrets.token_hex(4)}"
    env = {
        **os.environ, "COLABQ_REDIS_URL": redis_url, "COLABQ_KEY_PREFIX": prefix,
        "COLABQ_QUEUE_PREFIX": f"{prefix}.", "COLABQ_STATE_DIR": str(root / "state"),
        "COLABQ_COLAB_BIN": str(EMULATOR), "COLAB_EMU_HOME": str(root / "emulator"),
        "HOME": str(root / "home"), "PATH": f"{Path(PY).parent}:{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
    }  # fmt: skip
    beat = {**env, "COLABQ_STATE_DIR": str(root / "beat-state"), "HOME": str(root / "beat-home")}
    for d in ("home", "beat-home"):
        (root / d).mkdir()
    worker = start_worker(env, root / "worker.log")
    try:
        script = root / "job.sh"
        script.write_text(job_script(job_s))
        out = colabq(
            env, "submit", str(script), "--name", f"bench-loss-{scenario}", "--wall", "30m",
            "--local-store", str(root / "store"), "--json", "--waive", "config-diff",
            "--waive", "paths", "--waive", "monitoring",
        )  # fmt: skip
        job_id = json.loads(out)["job_id"]
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
        log = (root / "store" / f"bench-loss-{scenario}" / "logs" / job_id / "job.log").read_text()
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
    p.add_argument("--job-s", type=int, default=120)
    p.add_argument("--interval", type=float, default=60.0)
    p.add_argument(
        "--redis-url", default=os.environ.get("COLABQ_BENCH_REDIS_URL", "redis://127.0.0.1:6379/11")
    )
    a = p.parse_args()
    ok = True
    for scenario in ("worker", "host") if a.scenario == "both" else (a.scenario,):
        held, state = run(scenario, a.job_s, a.interval, a.redis_url)
        met = held <= BOUND_S[scenario] and state == "succeeded, exit 0"
        ok &= met
        print(
            f"P2 {scenario} lost during a {a.job_s} s job: {state}; GPU held {held:.1f} s after "
            f"the job's end (bound {BOUND_S[scenario]:.0f} s): {'met' if met else 'NOT met'}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
