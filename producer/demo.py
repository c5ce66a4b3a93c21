"""`colabq demo`: the whole path on one machine, on embedded defaults.

A broker (the Redis that answers, else one started here), a real Celery worker process, the
offline Colab emulator (`ops/colab`), the local Hub-compatible server (`ops/hubserver`, driven by
the real huggingface_hub client on the worker and on the emulated VM), a demo job submitted
through the same code as `colabq submit`, its log followed live, and the final report.
Everything it creates lives in one
temporary folder, with its own Redis key prefix, so a real deployment on the same Redis is never
touched.
"""

from __future__ import annotations

import json
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
from producer.clictx import load_settings
from producer.follow import follow_logs
from producer.submit import SubmitRequest, build_spec, check_output_repo, enqueue
from worker.celery_app import build_app
from worker.colab.driver import ColabCli
from worker.deps import build_ledger
from worker.errors import UserInputError
from worker.states import JobState

REPO = Path(__file__).resolve().parents[1]
EMULATOR = REPO / "ops" / "colab"
HUBSERVER = REPO / "ops" / "hubserver"
DEMO_REPO = "demo/colabq-demo-runs"
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


def start_hub(root: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    """The local Hub server with one write token for the demo user; returns (proc, url, token)."""
    token = f"hf_demo_{secrets.token_hex(16)}"
    tokens = root / "hub-tokens.json"
    tokens.write_text(json.dumps({token: {"user": "demo", "role": "write"}}))
    tokens.chmod(0o600)
    proc = subprocess.Popen(
        [sys.executable, str(HUBSERVER), "--data", str(root / "hub"), "--tokens", str(tokens),
         "--host", "127.0.0.1", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().strip()
    if not line.startswith("hubserver listening on "):
        proc.kill()
        raise UserInputError(f"The local Hub server did not start: {line!r}")
    return proc, line.removeprefix("hubserver listening on "), token


def run_demo(console: Console, *, keep: bool = False) -> int:
    if not EMULATOR.is_file():
        raise UserInputError(
            f"The Colab emulator is missing at {EMULATOR}: run the demo from a clone."
        )
    user = load_settings()  # an invalid setting stops the demo before it starts anything
    root = Path(tempfile.mkdtemp(prefix="colabq-demo-"))
    redis_url = user.redis_url if "redis_url" in user.model_fields_set else DEMO_REDIS
    broker = ensure_broker(redis_url)
    console.print(f"[bold]broker:[/] {broker.description}")
    key_prefix = f"colabq-demo-{secrets.token_hex(4)}"
    # Its own queue too: a demo worker never takes a real deployment's jobs, nor they its.
    queue = f"{key_prefix}.gpu.t4"
    hub, hub_url, token = start_hub(root)
    token_file = root / "secrets" / "hf_token"
    token_file.parent.mkdir(mode=0o700)
    token_file.write_text(token)
    token_file.chmod(0o600)
    console.print(f"[bold]hub:[/] local Hub-compatible server at {hub_url} (repo {DEMO_REPO})")
    env = {
        **os.environ,
        "COLABQ_REDIS_URL": broker.url,
        "COLABQ_KEY_PREFIX": key_prefix,
        "COLABQ_QUEUE_PREFIX": f"{key_prefix}.",
        "COLABQ_STATE_DIR": str(root / "state"),
        "COLABQ_COLAB_BIN": str(EMULATOR),
        "COLABQ_POLL_INTERVAL_S": "0.5",
        "COLAB_EMU_HOME": str(root / "emulator"),
        "HOME": str(root / "home"),
        "COLABQ_HF_ENDPOINT": hub_url,
        "COLABQ_HF_TOKEN_FILE": str(token_file),
        "HF_ENDPOINT": hub_url,
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        # The emulated VM's python3 is this one, as a Colab image has huggingface_hub.
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
    }
    (root / "home").mkdir()
    worker_log = open(root / "worker.log", "wb")  # noqa: SIM115 - closed in finally
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker", "-Q", queue,
         "-c", "1", "-n", f"{key_prefix}@%h", "-l", "INFO", "-E"],
        env=env, stdout=worker_log, stderr=subprocess.STDOUT, cwd=root,
    )  # fmt: skip
    console.print(
        f"[bold]worker:[/] Celery worker pid {worker.pid} on queue {queue} "
        f"(log {root / 'worker.log'})"
    )
    console.print(f"[bold]colab:[/] offline emulator {EMULATOR}")
    try:
        settings = load_settings(
            redis_url=broker.url, key_prefix=key_prefix, queue_prefix=f"{key_prefix}.",
            state_dir=root / "state", hf_endpoint=hub_url,
        )  # fmt: skip
        settings.ensure_state_dir()
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
                hub_repo=DEMO_REPO,
                sync_paths=("checkpoints",),
                expect=("checkpoints",),
                commit="demo",
            )
        )
        seen = check_output_repo(spec, settings, token)
        console.print(f"[bold]output repo:[/] {seen}")
        res = enqueue(spec, ledger, build_app(settings), settings.queue_prefix)
        console.print(f"[bold]submitted:[/] job {res.job_id} ({spec.run_name})\n")
        state = follow_logs(
            ledger,
            res.job_id,
            follow=True,
            write=lambda s: console.print(f"  {s}", markup=False, highlight=False),
        )
        rec = ledger.get(res.job_id)
        console.print()
        console.print(render.job_detail(rec, ledger.history(res.job_id)))
        left = ColabCli(EMULATOR, root / "probe-sessions.json", env=env).sessions()
        console.print(
            f"[bold]emulator sessions after the job:[/] {len(left)}"
            + ("" if not left else " " + ", ".join(s.endpoint for s in left))
        )
        hub_files = list_hub_files(hub_url, token)
        console.print(f"[bold]on the Hub:[/] {', '.join(hub_files)}")
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
        hub.terminate()
        hub.wait(timeout=10)
        subprocess.run(
            [str(REPO / "ops" / "colab-emu"), "kill-all"], env=env, capture_output=True, timeout=60
        )
        broker.close()
        if keep:
            console.print(f"demo files kept in {root}")
        else:
            time.sleep(0.1)
            shutil.rmtree(root, ignore_errors=True)


def list_hub_files(url: str, token: str) -> list[str]:
    from huggingface_hub import HfApi

    items = HfApi(endpoint=url, token=token).list_repo_tree(DEMO_REPO, recursive=True)
    return sorted(
        i.path for i in items if getattr(i, "size", None) is not None and i.path != ".gitattributes"
    )
