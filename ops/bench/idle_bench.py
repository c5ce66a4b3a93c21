"""System-added idle time per job: what colabq adds around the work, outside `colab` calls.

For each job, through the real runner, the Colab emulator, the real Redis and a local store:
  before = (exec client started) - (`colab new` returned), minus the time inside `colab` calls
  after  = (session verified gone) - (the job's exit seen), minus the time inside `colab` calls
The job's own work, the VM's uploads and the CLI's own latency are not colabq's idle time; the
runner's checks, bookkeeping, polling and reaction latency are. Target: median <= 1 s.

    .venv/bin/python ops/bench/idle_bench.py [--jobs 7]
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from worker.clock import SystemClock  # noqa: E402
from worker.colab.driver import ColabCli  # noqa: E402
from worker.deps import build_ledger  # noqa: E402
from worker.session.attach import (  # noqa: E402
    ExecProcess,
    ExecResult,
    spawn_detached,
)
from worker.session.jobfiles import JobFiles  # noqa: E402
from worker.session.runner import RunnerDeps, run_job  # noqa: E402
from worker.session.watchdog import start_watchdog  # noqa: E402
from worker.settings import load_settings  # noqa: E402
from worker.spec import ArtifactDest, Gpu, JobSpec, default_ttl_s  # noqa: E402
from worker.store.artifacts import LocalStore  # noqa: E402

EMULATOR = ROOT / "ops" / "colab"


class TimingDriver:
    """Wraps the real driver and records when each `colab` call ran."""

    def __init__(self, inner: ColabCli) -> None:
        self.inner = inner
        self.calls: list[tuple[str, float, float]] = []
        self.config_path = inner.config_path

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name in ("exec_argv", "exec_env", "local_record") or not callable(attr):
            return attr

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.time()
            try:
                return attr(*args, **kwargs)
            finally:
                self.calls.append((name, t0, time.time()))

        return timed

    def inside(self, start: float, end: float) -> float:
        return sum(max(0.0, min(b, end) - max(a, start)) for _, a, b in self.calls)


def one_job(root: Path, redis_url: str, prefix: str) -> tuple[float, float]:
    settings = load_settings(
        redis_url=redis_url, key_prefix=prefix, state_dir=root / "state", colab_bin=str(EMULATOR),
        poll_interval_s=0.2, watchdog_poll_s=0.5,
    )  # fmt: skip
    ledger = build_ledger(settings)
    wall = 600.0
    spec = JobSpec(
        job_id=secrets.token_hex(8), idempotency_key=secrets.token_hex(8),
        run_name="bench-idle-time-emulator", script="echo working\nsleep 1\n", gpu=Gpu.T4,
        wall_cap_s=wall, idle_timeout_s=30, ttl_s=default_ttl_s(wall),
        artifact=ArtifactDest(kind="local", repo=str(root / "store"), prefix="bench"),
        submitted_at=datetime.now(UTC),
    )  # fmt: skip
    ledger.create(spec)
    owner = secrets.token_hex(8)
    assert ledger.claim(spec.job_id, owner, 60)
    files = JobFiles(settings.state_dir / "jobs" / spec.job_id).ensure()
    driver = TimingDriver(ColabCli(EMULATOR, files.cli_config))
    spawned: list[float] = []

    def spawn(argv: list[str], log: Path, env: Any) -> ExecProcess:
        spawned.append(time.time())
        return spawn_detached(argv, log, env)

    clock = SystemClock()
    deps = RunnerDeps(
        clock=clock, ledger=ledger, driver=driver, store=LocalStore(), settings=settings,  # type: ignore[arg-type]
        files=files, start_watchdog=lambda f, env: start_watchdog(f, env, clock=clock),
        check_input=lambda uri: 0,
        spawn=spawn, worker_name="bench",
    )  # fmt: skip
    outcome = run_job(spec, owner, deps)
    if outcome.state.value != "succeeded":
        raise SystemExit(f"bench job did not succeed: {outcome.reason}")
    new_end = next(b for name, _, b in driver.calls if name == "new")
    before = spawned[0] - new_end - driver.inside(new_end, spawned[0])
    res = ExecResult.load(files.exec_result)
    assert res is not None
    job_end = res.sentinel_at["EXIT"]
    gone_at = max(b for name, _, b in driver.calls if name == "status")
    after = gone_at - job_end - driver.inside(job_end, gone_at)
    return before, after


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=int, default=7)
    p.add_argument(
        "--redis-url", default=os.environ.get("COLABQ_BENCH_REDIS_URL", "redis://127.0.0.1:6379/11")
    )
    a = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="colabq-idle-bench-"))
    os.environ["COLAB_EMU_HOME"] = str(root / "emulator")
    os.environ["HOME"] = str(root / "home")
    (root / "home").mkdir()
    prefix = f"colabq-bench-{secrets.token_hex(4)}"
    befores, afters = [], []
    try:
        for i in range(a.jobs):
            b, c = one_job(root, a.redis_url, prefix)
            befores.append(b)
            afters.append(c)
            print(
                f"job {i + 1}: allocation->exec start {b:.3f} s, "
                f"job end->deallocation {c:.3f} s (outside colab calls)"
            )
    finally:
        subprocess.run(
            [str(ROOT / "ops" / "colab-emu"), "kill-all"], capture_output=True, timeout=60
        )
        shutil.rmtree(root, ignore_errors=True)
    totals = [b + c for b, c in zip(befores, afters, strict=True)]
    print(f"median allocation->exec start: {statistics.median(befores):.3f} s")
    print(f"median job end->deallocation:  {statistics.median(afters):.3f} s")
    print(
        f"median system-added idle per job: {statistics.median(totals):.3f} s "
        f"over {a.jobs} jobs (target <= 1 s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
