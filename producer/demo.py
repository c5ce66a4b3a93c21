"""`colabq demo`: the whole path on one machine, on embedded defaults.

A broker (the Redis that answers, else one started here), a real Celery worker process, the
offline Colab emulator (`ops/colab`), a demo job submitted through the same code as
`colabq submit`, its log followed live, and the final report. Everything it creates lives in one
temporary folder, with its own Redis key prefix, so a real deployment on the same Redis is never
touched.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

from producer import render
from producer.broker import ensure_broker
from producer.cli import follow_logs
from producer.submit import SubmitRequest, build_spec, enqueue
from worker.celery_app import build_app
from worker.colab import ColabCli
from worker.deps import build_ledger
from worker.errors import UserInputError
from worker.settings import load_settings
from worker.states import JobState

REPO = Path(__file__).resolve().parents[1]
EMULATOR = REPO / "ops" / "colab"
DEMO_REDIS = "redis://127.0.0.1:6379/12"

DEMO_SCRIPT = """\
#!/usr/bin/env bash
# A stand-in for a training run: a few "epochs", a checkpoint, a log line each.
set -euo pipefail
mkdir -p checkpoints
for epoch in 1 2 3; do
  echo "epoch ${epoch}/3 loss=$(python3 -c "print(round(1 / ${epoch}, 3))")"
  sleep 1
done
echo "weights after 3 epochs" > checkpoints/last.pt
echo "training done"
"""


def run_demo(console: Console, *, keep: bool = False) -> int:
    if not EMULATOR.is_file():
        raise UserInputError(f"The Colab emulator is missing at {EMULATOR}: run the demo from a clone.")
    root = Path(tempfile.mkdtemp(prefix="colabq-demo-"))
    redis_url = os.environ.get("COLABQ_REDIS_URL", DEMO_REDIS)
    broker = ensure_broker(redis_url)
    console.print(f"[bold]broker:[/] {broker.description}")
    key_prefix = f"colabq-demo-{secrets.token_hex(4)}"
    env = {
        **os.environ,
        "COLABQ_REDIS_URL": broker.url,
        "COLABQ_KEY_PREFIX": key_prefix,
        "COLABQ_STATE_DIR": str(root / "state"),
        "COLABQ_COLAB_BIN": str(EMULATOR),
        "COLABQ_POLL_INTERVAL_S": "0.5",
        "COLAB_EMU_HOME": str(root / "emulator"),
        "HOME": str(root / "home"),
    }
    (root / "home").mkdir()
    worker_log = open(root / "worker.log", "wb")  # noqa: SIM115 - closed in finally
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker", "-Q", "gpu.t4",
         "-c", "1", "-n", f"{key_prefix}@%h", "-l", "INFO", "-E"],
        env=env, stdout=worker_log, stderr=subprocess.STDOUT, cwd=root,
    )  # fmt: skip
    console.print(f"[bold]worker:[/] Celery worker pid {worker.pid} on queue gpu.t4 (log {root / 'worker.log'})")
    console.print(f"[bold]colab:[/] offline emulator {EMULATOR}")
    try:
        settings = load_settings(redis_url=broker.url, key_prefix=key_prefix)
        ledger = build_ledger(settings)
        script = root / "demo-job.sh"
        script.write_text(DEMO_SCRIPT)
        spec = build_spec(
            SubmitRequest(
                script=script,
                run_name="demo-synthetic-mlp-3ep-emulator",
                gpu="T4",
                wall="10m",
                idle="60s",
                local_store=root / "store",
                sync_paths=("checkpoints",),
                expect=("checkpoints",),
                commit="demo",
            )
        )
        res = enqueue(spec, ledger, build_app(settings))
        console.print(f"[bold]submitted:[/] job {res.job_id} ({spec.run_name})\n")
        state = follow_logs(ledger, res.job_id, follow=True, write=lambda s: console.print(f"  {s}", markup=False, highlight=False))
        rec = ledger.get(res.job_id)
        console.print()
        console.print(render.job_detail(rec, ledger.history(res.job_id)))
        left = ColabCli(EMULATOR, root / "probe-sessions.json", env=env).sessions()
        console.print(
            f"[bold]emulator sessions after the job:[/] {len(left)}"
            + ("" if not left else " " + ", ".join(s.endpoint for s in left))
        )
        ok = state is JobState.SUCCEEDED and not left
        console.print("[bold green]demo passed[/]" if ok else "[bold red]demo failed[/]")
        return 0 if ok else 1
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
        worker_log.close()
        broker.close()
        if keep:
            console.print(f"demo files kept in {root}")
        else:
            time.sleep(0.1)
            shutil.rmtree(root, ignore_errors=True)
