"""The environment of one emulated deployment (worker host, Redis prefix, emulator account), shared
by the integration tests' fleet fixture and the chaos suite so both drive colabq the same way.

Imports nothing from colabq or the tests: the fixture imports it while pytest collects.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EMULATOR = ROOT / "ops" / "colab"
EMU_ADMIN = ROOT / "ops" / "colab-emu"


def fleet_env(
    redis_url: str, root: Path, prefix: str, extra: dict[str, str] | None = None
) -> dict[str, str]:
    """A worker host's environment under `root` with short lease and poll settings (seconds,
    not minutes, so that failures are found and recovered from within a test)."""
    (root / "home").mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "COLABQ_REDIS_URL": redis_url,
        "COLABQ_KEY_PREFIX": prefix,
        # Its own queue: no other worker on this Redis (another suite, a demo) takes its jobs.
        "COLABQ_QUEUE_PREFIX": f"{prefix}.",
        "COLABQ_STATE_DIR": str(root / "state"),
        "COLABQ_COLAB_BIN": str(EMULATOR),
        "COLABQ_POLL_INTERVAL_S": "0.2",
        "COLABQ_WATCHDOG_POLL_S": "0.5",
        "COLABQ_LEASE_TTL_S": "3",
        "COLABQ_HEARTBEAT_INTERVAL_S": "1",
        "COLABQ_ATTACH_STALL_S": "3",
        # The VM's python3 is the venv's, as a Colab image has huggingface_hub.
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "COLAB_EMU_HOME": str(root / "emulator"),
        "HOME": str(root / "home"),
        **(extra or {}),
    }


def job_share(root: Path) -> Path:
    """A folder a job on an emulated VM can write and the test can read (a stamp, a flag, a
    local store the job breaks): run as root, the VM's wrapper runs the job as an unprivileged
    user, who cannot reach `root` (pytest's folders are their user's alone) any more than a real
    VM reaches the worker host. It is made once per `root`, world-writable, in the system's
    temporary folder; `root/job-share` links to it; `drop_job_share` removes it."""
    link = root / "job-share"
    if not link.is_symlink():
        real = Path(tempfile.mkdtemp(prefix="colabq-job-share-"))
        real.chmod(0o1777)
        link.symlink_to(real)
    return link.resolve()


def drop_job_share(root: Path) -> None:
    link = root / "job-share"
    if link.is_symlink():
        shutil.rmtree(link.resolve(), ignore_errors=True)
        link.unlink()


def kill_processes_mentioning(text: str) -> None:
    """End what a run left behind (watchdogs, exec clients, adopters): every process whose
    command line names `text` (a test's or a run's folder)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            with contextlib.suppress(OSError):
                os.kill(int(entry.name), signal.SIGKILL)
