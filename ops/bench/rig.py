"""What the benchmarks share: a fleet of one real worker on the Colab emulator under a private key
prefix, a private redis-server, and the raw Celery `send_task` anchor."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
PY = sys.executable
EMULATOR = ROOT / "ops" / "colab"
DEFAULT_REDIS_URL = os.environ.get("COLABQ_BENCH_REDIS_URL", "redis://127.0.0.1:6379/11")


RUN_VENV = ROOT / ".venv-run"


def runtime_python() -> Path:
    """The python of a venv holding colabq with its runtime dependencies only (`make demo`'s,
    a user's install: no development extras, so no OpenTelemetry for redis-py to import). Made
    once (about 40 s) and reused until pyproject.toml or the constraints change."""
    py, stamp = RUN_VENV / "bin" / "python", RUN_VENV / ".installed"
    sources = (ROOT / "pyproject.toml", ROOT / "ops" / "constraints.txt")
    if stamp.exists() and all(s.stat().st_mtime <= stamp.stat().st_mtime for s in sources):
        return py
    print(f"building {RUN_VENV.name}: colabq without development extras", flush=True)
    subprocess.run([PY, "-m", "venv", "--clear", str(RUN_VENV)], check=True)
    subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "-c", str(ROOT / "ops" / "constraints.txt"), "-e", str(ROOT)],
        check=True,
    )  # fmt: skip
    stamp.touch()
    return py


def fleet_env(root: Path, redis_url: str = DEFAULT_REDIS_URL) -> dict[str, str]:
    """The environment of a worker (and of `colabq` commands) under `root`: its own key and
    queue prefix, state dir, emulator home and HOME."""
    (root / "home").mkdir(parents=True, exist_ok=True)
    prefix = f"colabq-bench-{secrets.token_hex(4)}"
    return {
        **os.environ,
        "COLABQ_REDIS_URL": redis_url,
        "COLABQ_KEY_PREFIX": prefix,
        "COLABQ_QUEUE_PREFIX": f"{prefix}.",
        "COLABQ_STATE_DIR": str(root / "state"),
        "COLABQ_COLAB_BIN": str(EMULATOR),
        "COLAB_EMU_HOME": str(root / "emulator"),
        "HOME": str(root / "home"),
        "PATH": f"{Path(PY).parent}:{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
    }


def start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A real Celery worker on the T4 queue of `env`'s prefix, once it says it is ready."""
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


def start_gate(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`colabq gate` for `env`'s deployment (`worker.gate`), once it serves (holds the lease)."""
    from worker.records.keys import Keys

    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [str(Path(PY).parent / "colabq"), "gate"], env=env, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT,
        )  # fmt: skip
    client = redis.Redis.from_url(env["COLABQ_REDIS_URL"])
    deadline = time.monotonic() + 60
    while not client.exists(Keys(env["COLABQ_KEY_PREFIX"]).gate_lease()):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the gate did not start:\n{log.read_text()[-2000:]}")
        time.sleep(0.05)
    return proc


def tear_down(env: dict[str, str], root: Path, *procs: subprocess.Popen[bytes]) -> None:
    """Stop the workers, every emulated VM, the prefix's keys and the folder."""
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    subprocess.run([str(ROOT / "ops" / "colab-emu"), "kill-all"], env=env, capture_output=True)
    client = redis.Redis.from_url(env["COLABQ_REDIS_URL"])
    for key in client.scan_iter(f"{env['COLABQ_KEY_PREFIX']}*", count=1000):
        client.delete(key)
    shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def private_redis() -> Iterator[tuple[str, Path]]:
    """(url, folder): a redis-server of the bench's own, so that its memory and load are only
    the bench's; gone afterwards."""
    from producer.broker import free_port
    from tests.conftest import start_redis_server

    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    with tempfile.TemporaryDirectory(prefix="colabq-bench-redis-") as tmp:
        conf = f'bind 127.0.0.1\nport {port}\nsave ""\nappendonly no\ndir {tmp}\n'
        proc = start_redis_server(conf, url)
        if proc is None:
            raise SystemExit("redis-server is needed (not found, or it did not start)")
        try:
            yield url, Path(tmp)
        finally:
            proc.kill()
            proc.wait()


def raw_send(url: str, queue: str, payloads: list[str]) -> float:
    """The anchor of submission: plain Celery `send_task` of `payloads`, one connection, no
    checks and no ledger; its time in seconds."""
    from celery import Celery

    from worker.celery_app import RUN_JOB

    app = Celery("bench", broker=url)
    t0 = time.perf_counter()
    with app.producer_or_acquire() as producer:
        for payload in payloads:
            app.send_task(RUN_JOB, args=[payload], queue=queue, producer=producer)
    return time.perf_counter() - t0
