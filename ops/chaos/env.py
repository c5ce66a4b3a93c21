"""The environment of one emulated deployment (worker host, Redis prefix, emulator account), shared
by the integration tests' fleet fixture and the chaos suite so both drive colabq the same way.

Imports nothing from colabq or the tests: the fixture imports it while pytest collects.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
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
