"""The kill matrix's targets: each host-side process colabq runs for one job, found from outside
(by its command line in /proc, as an operator or the OOM killer would pick it) and SIGKILLed the
way it would die for real.

- the worker's main process: that pid alone (its pool child is left to fend for itself);
- the pool child: the main process's child running the job (Celery replaces it);
- the per-job watchdog: `python -m worker.session.watchdog <job folder>`;
- the attach client: `python -m worker.session.attach <job folder>`, with its process group (its
  `colab exec` child dies with it, as in a crash of the client);
- a `colab` call: the emulator's process whose `--config` names the job folder, by its command
  (`new`, `upload`, `download`, `stop`, `exec`); the launch exec and the attach exec are told
  apart by their cell (`-f launch-*.py`, `-f attach-*.py`). That pid alone: `new`, `upload`,
  `download` and `stop` share the worker's process group.

Processes of the emulated VMs (their environment holds `COLAB_EMU_VM_MARK`) are never targets.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from ops.chaos.env import EMULATOR

WATCHDOG = "worker.session.watchdog"
ATTACH = "worker.session.attach"
VM_MARK = b"COLAB_EMU_VM_MARK="
_GLOBAL_WITH_VALUE = ("--config", "-c", "--auth")


class Target(StrEnum):
    WORKER_MAIN = "worker main"
    POOL_CHILD = "pool child"
    WATCHDOG = "watchdog"
    ATTACH_CLIENT = "attach client (pgrp)"
    NEW = "colab new"
    UPLOAD = "colab upload"
    LAUNCH_EXEC = "launch exec"
    ATTACH_EXEC = "attach exec"
    DOWNLOAD = "colab download"
    STOP = "colab stop"


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    argv: tuple[str, ...]

    def short(self) -> str:
        return " ".join(a.rsplit("/", 1)[-1] if a.startswith("/") else a for a in self.argv)[:90]


def _read(pid: int) -> Proc | None:
    base = Path(f"/proc/{pid}")
    try:
        raw = (base / "cmdline").read_bytes()
        stat = (base / "stat").read_text()
        environ = (base / "environ").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X") or VM_MARK in environ:
        return None
    argv = tuple(a.decode(errors="replace") for a in raw.split(b"\0") if a)
    return Proc(pid, int(fields[1]), argv)


def all_processes() -> list[Proc]:
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me and (p := _read(int(entry))) is not None:
            found.append(p)
    return found


def job_processes(job_dir: Path) -> list[Proc]:
    """Host-side processes whose command line names the job's folder."""
    needle = str(job_dir)
    return [p for p in all_processes() if any(needle in a for a in p.argv)]


def colab_command(argv: tuple[str, ...]) -> str | None:
    """The subcommand of an emulated `colab` call (`python3 ops/colab --config X new ...`)."""
    try:
        i = argv.index(str(EMULATOR)) + 1
    except ValueError:
        return None
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in _GLOBAL_WITH_VALUE else 1
    return argv[i] if i < len(argv) else None


def _cell(argv: tuple[str, ...]) -> str:
    for flag in ("-f", "--file"):
        if flag in argv and argv.index(flag) + 1 < len(argv):
            return Path(argv[argv.index(flag) + 1]).name
    return ""


def children(pid: int) -> list[Proc]:
    return [p for p in all_processes() if p.ppid == pid]


def find(target: Target, job_dir: Path, worker_pid: int) -> list[Proc]:
    """The live processes of `target` for the job (most likely first)."""
    if target is Target.WORKER_MAIN:
        return [p for p in [_read(worker_pid)] if p is not None]
    if target is Target.POOL_CHILD:
        return [p for p in children(worker_pid) if any("celery" in a for a in p.argv)]
    procs = job_processes(job_dir)
    if target is Target.WATCHDOG:
        return [p for p in procs if WATCHDOG in p.argv]
    if target is Target.ATTACH_CLIENT:
        return [p for p in procs if ATTACH in p.argv]
    if target in (Target.LAUNCH_EXEC, Target.ATTACH_EXEC):
        prefix = "launch-" if target is Target.LAUNCH_EXEC else "attach-"
        return [
            p for p in procs if colab_command(p.argv) == "exec" and _cell(p.argv).startswith(prefix)
        ]
    command = target.value.split()[-1]
    calls = [p for p in procs if colab_command(p.argv) == command]
    # The runner's own call first (its parent is the pool child), then the watchdog's.
    pool = {p.pid for p in children(worker_pid)}
    return sorted(calls, key=lambda p: p.ppid not in pool)


def kill(target: Target, proc: Proc) -> None:
    """SIGKILL as the target would die: the attach client with its process group, anything else
    that pid alone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if target is Target.ATTACH_CLIENT:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            os.kill(proc.pid, signal.SIGKILL)
