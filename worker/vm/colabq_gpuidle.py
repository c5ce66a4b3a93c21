"""colabq's GPU idle watch: runs on the Colab VM beside the job, started by the wrapper only when
the job asked for it (`--gpu-idle S`). Standard library only.

Every `--interval` seconds it reads the GPUs' utilization (the highest of them, `nvidia-smi
--query-gpu=utilization.gpu`) into RUN/gpu_util, which the wrapper's heartbeat carries. When
it stayed below `--below` percent for `--idle-s` seconds (a hung dataloader, a deadlock), it
writes RUN/gpu_idle ("IDLE_S BELOW SINCE_EPOCH") and sends SIGTERM to the `timeout` whose pid is
in `--pid-file`: `timeout` stops the job's process group (SIGKILL after its grace) and the
wrapper then syncs and ends as for any end, printing the GPU_IDLE sentinel. A VM where no
utilization can be read is never stopped by this watch.

Usage: colabq_gpuidle.py --run DIR --pid-file F --idle-s S [--below P] [--interval S] [--smi CMD]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path


def read_util(smi: str) -> float | None:
    """The highest utilization of the VM's GPUs, percent; None when it cannot be read."""
    try:
        out = subprocess.run(
            [smi, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    values = []
    for line in out.stdout.splitlines():
        try:
            values.append(float(line.strip()))
        except ValueError:
            continue
    return max(values) if out.returncode == 0 and values else None


def step(
    since: float | None, util: float | None, now: float, idle_s: float, below: float
) -> tuple[float | None, bool]:
    """(when the idle stretch began, whether it lasted long enough): one reading more. A reading
    at or above the threshold, or none at all, ends the stretch."""
    if util is None or util >= below:
        return None, False
    since = now if since is None else since
    return since, now - since >= idle_s


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="colabq_gpuidle.py")
    p.add_argument("--run", type=Path, required=True)
    p.add_argument("--pid-file", type=Path, required=True)
    p.add_argument("--idle-s", type=float, required=True)
    p.add_argument("--below", type=float, default=5.0)
    p.add_argument("--interval", type=float, default=5.0)
    p.add_argument("--smi", default="nvidia-smi")
    a = p.parse_args(argv)
    since: float | None = None
    while True:
        util = read_util(a.smi)
        _write(a.run / "gpu_util", "" if util is None else f"{util:g}")
        since, idle = step(since, util, time.time(), a.idle_s, a.below)
        if idle and since is not None:
            _write(a.run / "gpu_idle", f"{a.idle_s:g} {a.below:g} {since:.3f}")
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(a.pid_file.read_text(encoding="utf-8").strip()), signal.SIGTERM)
            return 0
        time.sleep(min(a.interval, max(a.idle_s / 4, 0.2)))


if __name__ == "__main__":
    raise SystemExit(main())
