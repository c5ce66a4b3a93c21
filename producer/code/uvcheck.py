"""The uv side of a shipped repository: is it a uv project, is its lock current, which Python
does it pin.

`uv lock --check` runs with the uv installed beside the running Python (colabq's own
environment pins one), else the first on PATH. The pin is read from the shipped commit:
`.python-version`, else `requires-python` in pyproject.toml; uv on the VM reads the same files.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

LOCK_TIMEOUT_S = 300.0
# Settings of the user's shell that would change what `uv lock --check` does.
_UV_DROPPED = ("UV_FROZEN", "UV_LOCKED", "UV_NO_SYNC", "UV_PROJECT", "UV_PROJECT_ENVIRONMENT")


def find_uv() -> str | None:
    """The uv next to the running Python, else the first on PATH, or None."""
    beside = Path(sys.executable).parent / "uv"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("uv")


@dataclass(frozen=True)
class LockCheck:
    """`uv lock --check`'s answer: `current`, or why not (`stale`: the lock must be redone)."""

    current: bool
    stale: bool = False
    problem: str = ""


def lock_check(uv: str, project: Path) -> LockCheck:
    env = {k: v for k, v in os.environ.items() if k not in _UV_DROPPED}
    try:
        done = subprocess.run(
            [uv, "lock", "--check"],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=LOCK_TIMEOUT_S,
            env=env,
            check=False,
        )
    except OSError as exc:
        return LockCheck(False, problem=f"{uv} could not run ({exc.strerror or exc})")
    except subprocess.TimeoutExpired:
        return LockCheck(False, problem=f"uv lock --check took over {LOCK_TIMEOUT_S:.0f}s")
    if done.returncode == 0:
        return LockCheck(True)
    text = done.stderr + done.stdout
    if "needs to be updated" in text or "lockfile at `uv.lock` needs" in text:
        return LockCheck(False, stale=True)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    reason = next(
        (ln for ln in lines if ln.startswith(("error:", "\u00d7"))), lines[0] if lines else ""
    )
    return LockCheck(
        False, problem=reason.removeprefix("error:").strip() or f"exit {done.returncode}"
    )


def python_pin(python_version: str | None, pyproject: str | None) -> str:
    """The project's Python pin: `.python-version`'s first line, else `requires-python`."""
    if python_version:
        for line in python_version.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                return line[:40]
    if pyproject:
        try:
            project = tomllib.loads(pyproject).get("project", {})
        except tomllib.TOMLDecodeError:
            return ""
        pin = project.get("requires-python") if isinstance(project, dict) else None
        if isinstance(pin, str):
            return pin.strip()[:40]
    return ""
