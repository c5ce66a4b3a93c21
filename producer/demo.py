"""`colabq demo`: the whole path on one machine, on embedded defaults.

A broker (the Redis that answers, else one started here), a real Celery worker process, the
offline Colab emulator (`ops/colab`), the local Hub-compatible server (`ops/hubserver`, driven by
the real huggingface_hub client on the worker and on the emulated VM), a demo job submitted
through the same code as `colabq submit`, its log followed live, and the final report.
The job ships a tiny uv project (`ops/uvproject.py`: its lock resolves offline from its own
wheels) with `code: snapshot`: its code and environment checks, the archive staged on the Hub,
and on the VM the commit unpacked, `uv sync --frozen` and the job under `uv run --no-sync`.
Everything it creates lives in one temporary folder, with its own Redis key prefix, so a real
deployment on the same Redis is never touched.
"""

from __future__ import annotations

import dataclasses
import importlib.util
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
from rich.text import Text

from producer import render
from producer.ask import wait_for_gate
from producer.broker import ensure_broker
from producer.clictx import load_settings
from producer.code.checks import code_finding, environment_finding
from producer.code.ship import CodeAsked, Shipping
from producer.follow import follow_logs
from producer.preflight.report import Verdict
from producer.submit import SubmitRequest, build_spec, check_output_repo, destination_of, enqueue
from worker.colab.driver import ColabCli
from worker.deps import build_ledger
from worker.errors import UserInputError
from worker.spec import CodeSpec
from worker.states import JobState
from worker.store.hub import HubStore

REPO = Path(__file__).resolve().parents[1]
EMULATOR = REPO / "ops" / "colab"
HUBSERVER = REPO / "ops" / "hubserver"
UVPROJECT = REPO / "ops" / "uvproject.py"
DEMO_REPO = "demo/colabq-demo-runs"
DEMO_REDIS = "redis://127.0.0.1:6379/12"

DEMO_SCRIPT = """\
#!/usr/bin/env bash
# A stand-in for a training run, in the project's folder on the VM under `uv run --no-sync`: the
# commit it runs, the project's code in its environment, a few "epochs", a checkpoint.
set -euo pipefail
echo "commit $(cat .colabq-commit) (the snapshot colabq shipped)"
python train.py
mkdir -p checkpoints
for epoch in 1 2 3; do
  echo "epoch ${epoch}/3 loss=$(python -c "print(round(1 / ${epoch}, 3))")"
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
    broker = ensure_broker(redis_url, user.redis_master_name, user.sentinel_login())
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
        "COLABQ_REDIS_MASTER_NAME": user.redis_master_name or "",
        "COLABQ_REDIS_SENTINEL_USERNAME": user.sentinel_login().username or "",
        "COLABQ_REDIS_SENTINEL_PASSWORD": user.sentinel_login().password or "",
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
        # The project's lock resolves from its own wheels: uv on the VM needs no network.
        "UV_OFFLINE": "1",
        "UV_PYTHON_DOWNLOADS": "never",
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
        request = SubmitRequest(
            script=script,
            run_name="demo-synthetic-mlp-3ep-emulator",
            gpu="T4",
            wall="10m",
            idle="60s",
            hub_repo=DEMO_REPO,
            sync_paths=("checkpoints",),
            expect=("checkpoints",),
        )
        shipping = Shipping()
        code = ship_code(console, shipping, request, build_project(root / "project"))
        spec = build_spec(dataclasses.replace(request, code=code))
        seen = check_output_repo(spec, settings, token)
        console.print(f"[bold]output repo:[/] {seen}")
        quiet_hub_client()  # this process stages the snapshot on the local Hub
        shipping.stage(settings, lambda: HubStore(hub_url, token))
        for line in shipping.plan_lines([spec]):  # what the VM fetches and runs
            label, _, rest = line.partition(": ")
            console.print(Text.assemble((f"{label}:", "bold"), f" {rest}"))
        wait_for_gate(ledger, 120.0)  # the worker's gate duty answers requests once it is up
        res = enqueue(spec, ledger, wait_s=settings.gate_wait_s)
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


def quiet_hub_client() -> None:
    """This process's huggingface_hub, for the local Hub server: no Xet (the server has no Xet
    storage; the flag is read when the client is imported, so its constant too), no progress
    bars in the demo's output."""
    from huggingface_hub import constants
    from huggingface_hub.utils.tqdm import disable_progress_bars

    os.environ["HF_HUB_DISABLE_XET"] = "1"
    constants.HF_HUB_DISABLE_XET = True
    disable_progress_bars()


def build_project(root: Path) -> Path:
    """The demo's training repository: ops/uvproject.py's tiny uv project, committed (a file
    of the clone, like the emulator; loaded by its path, as `ops` is no installed package)."""
    spec = importlib.util.spec_from_file_location("colabq_demo_uvproject", UVPROJECT)
    if spec is None or spec.loader is None or not UVPROJECT.is_file():
        raise UserInputError(f"{UVPROJECT} is missing: run the demo from a clone.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return Path(module.build_uv_project(root).root)


def ship_code(
    console: Console, shipping: Shipping, request: SubmitRequest, project: Path
) -> CodeSpec:
    """`code: snapshot` of `project`'s HEAD as `colabq submit` ships it: surveyed, its code and
    environment checks, and the job's CodeSpec (the archive is staged once the job is built)."""
    asked = CodeAsked("snapshot", project)
    state = shipping.survey(asked)
    assert state is not None  # a mode was asked
    for finding in (code_finding(state), environment_finding(state)):
        console.print(f"[bold]{finding.check.value}:[/] {finding.verdict.value} {finding.saw}")
        if finding.verdict is Verdict.FAIL:
            raise UserInputError(f"The demo's project failed its {finding.check.value} check.")
    return shipping.code_spec(state, asked, destination_of(request))


def list_hub_files(url: str, token: str) -> list[str]:
    from huggingface_hub import HfApi

    items = HfApi(endpoint=url, token=token).list_repo_tree(DEMO_REPO, recursive=True)
    return sorted(
        i.path for i in items if getattr(i, "size", None) is not None and i.path != ".gitattributes"
    )
