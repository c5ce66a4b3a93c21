"""The GPU idle watch (issue 21): its decision, the watch as the VM runs it (a fake nvidia-smi,
a real process it stops), the owner's reason and the wrapper's options."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from worker.errors import UserInputError
from worker.gpuidle import idle_reason, idle_text
from worker.vm.colabq_gpuidle import step

WATCH = Path(__file__).resolve().parents[2] / "worker" / "vm" / "colabq_gpuidle.py"


def test_idle_only_after_the_whole_window_below_the_threshold() -> None:
    since, idle = step(None, 0.0, 100.0, 60, 5)
    assert (since, idle) == (100.0, False)
    assert step(since, 4.0, 159.0, 60, 5) == (100.0, False)
    assert step(since, 0.0, 160.0, 60, 5) == (100.0, True)
    # A busy reading, or none (no nvidia-smi), starts the window again.
    assert step(since, 5.0, 150.0, 60, 5) == (None, False)
    assert step(since, None, 150.0, 60, 5) == (None, False)


def test_reason_names_the_window_threshold_and_since() -> None:
    since = 1_800_000_000.0  # 08:00 UTC
    why = idle_reason({"exec_gpu_idle": f"1200 5 {since}"})
    assert why is not None and why.startswith("GPU idle 20m (below 5 % since 08:00 UTC)")
    assert idle_reason({"exec_exit": "143"}) is None
    assert (idle_text(3600), idle_text(90)) == ("1h", "1m30s")


def test_the_watch_stops_the_process_once_idle(tmp_path: Path) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 0\necho 3\n")  # two GPUs, both idle
    smi.chmod(0o755)
    job = subprocess.Popen(["sleep", "60"])
    (tmp_path / "job.pid").write_text(str(job.pid))
    t0 = time.monotonic()
    subprocess.run(
        [sys.executable, str(WATCH), "--run", str(tmp_path), "--pid-file",
         str(tmp_path / "job.pid"), "--idle-s", "0.6", "--interval", "0.1", "--smi", str(smi)],
        check=True, timeout=20,
    )  # fmt: skip
    assert job.wait(timeout=10) == -15
    assert time.monotonic() - t0 >= 0.6
    assert (tmp_path / "gpu_util").read_text() == "3"
    idle_s, below, since = (tmp_path / "gpu_idle").read_text().split()
    assert (idle_s, below) == ("0.6", "5") and float(since) > 0


def test_a_job_files_gpu_idle_key_reaches_the_spec_off_by_default(tmp_path: Path) -> None:
    from producer.jobfile import SubmitOptions, validate
    from producer.submit import build_spec
    from producer.submit_inputs import submit_request
    from worker.spec import JobSpec

    script = tmp_path / "train.sh"
    script.write_text("echo hi\n")
    values = {"script": script, "name": "coco-r50", "local_store": tmp_path / "s"}

    def spec_of(o: SubmitOptions) -> JobSpec:
        return build_spec(submit_request(o, (), {}, lambda: pytest.fail("no ledger")))

    assert spec_of(validate(values, "job.yaml")).gpu_idle_s is None
    assert spec_of(validate({**values, "gpu_idle": "20m"}, "job.yaml")).gpu_idle_s == 1200
    with pytest.raises(UserInputError, match="--gpu-idle"):
        spec_of(validate({**values, "gpu_idle": "soon"}, "job.yaml"))


def test_preflight_suggests_gpu_idle_for_long_runs_only_without_it() -> None:
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo

    from producer.preflight.eta import GPU_IDLE_SUGGESTION, check_eta

    now, zone = datetime(2026, 3, 2, 9, tzinfo=UTC), ZoneInfo("UTC")

    def action(epochs: float, **kw: bool) -> str:
        return check_eta(epochs=epochs, seconds_per_epoch=60, now=now, zone=zone, **kw).next_action

    assert action(90) == GPU_IDLE_SUGGESTION  # 1.5 h
    assert action(90, gpu_idle=True) == "none"
    assert action(30) == "none"  # half an hour
