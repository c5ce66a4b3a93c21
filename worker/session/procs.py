"""The processes colabq starts for one job on a worker host, found and ended as a group.

A job's exec clients and `colab` calls all name the job's folder on their command line (the
client's argument, the CLI's `--config <job>/colab-sessions.json`), so `/proc` tells which are
the job's whatever started them and whoever died since: a killed worker, an earlier owner, an
attach client whose `colab exec` child outlived it. A real `colab exec` left running hangs until
its `--timeout` and then writes its session's record back, so every one of them is killed, with
its process group, before a session is stopped.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

WATCHDOG_MODULE = "worker.session.watchdog"
ATTACH_MODULE = "worker.session.attach"


def _argv(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name: [state, ppid, pgrp, ...]."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    return stat[stat.rindex(")") + 2 :].split()


def find_job_processes(root: Path) -> Iterator[tuple[int, list[str]]]:
    """(pid, argv) of live processes whose command line names the job folder `root` (never
    this process, never the job's watchdog or the `colab` calls it is making)."""
    needle = str(root)
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            argv = _argv(int(entry))
            if any(needle in a for a in argv):
                found.append((int(entry), argv))
    watchdogs = {pid for pid, argv in found if WATCHDOG_MODULE in argv}
    for pid, argv in found:
        stat = _stat(pid)
        if pid in watchdogs or not stat or stat[0] in ("Z", "X") or int(stat[1]) in watchdogs:
            continue
        yield pid, argv


def is_exec_client(argv: list[str]) -> bool:
    """An attach client, or a `colab exec` (a real one outliving its session writes back)."""
    return ATTACH_MODULE in argv or "exec" in argv


def cli_running(config_path: Path) -> bool:
    """True while any `colab` call on this CLI state file is alive (e.g. a `colab new` that a
    killed worker left running, which may still write the endpoint)."""
    needle = str(config_path)
    return any(any(needle in a for a in argv) for _, argv in find_job_processes(config_path.parent))


def kill_job_processes(root: Path, *, everything: bool = False) -> int:
    """SIGKILL the job's exec clients (with `everything`, every process of the job but its
    watchdog), each with its process group when it leads one; returns how many were found."""
    found = [pid for pid, argv in find_job_processes(root) if everything or is_exec_client(argv)]
    for pid in found:
        with contextlib.suppress(OSError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return len(found)
