"""A worker host whose `colab` is the offline emulator (`ops/colab`, for rehearsals and the demo):
whether the VMs it makes are reachable by the job's user.

On Colab, every user of a VM reaches its `/`. The emulator's VMs are folders of this host: run
as root (the wrapper then runs the job as an unprivileged user), they must lie where that user
can reach them, which the emulator cannot arrange when its home and `TMPDIR` are both private
(every job would end with exit 126). The emulator says where its VMs go, or why none can be
reached, through its own admin tool (`colab-emu reach`, beside it): the worker refuses to start
on that line. The real CLI has no such tool, and nothing is checked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

ADMIN_NAME = "colab-emu"


def emulator_admin(colab_bin: str) -> Path | None:
    """The emulator's admin tool when `colab_bin` is the emulator (its `colab_emulator`
    package and `colab-emu` beside it), else None."""
    found = shutil.which(colab_bin)
    if found is None:
        return None
    here = Path(os.path.realpath(found)).parent
    admin = here / ADMIN_NAME
    if admin.is_file() and (here / "colab_emulator" / "__init__.py").is_file():
        return admin
    return None


def vm_reach_problem(
    colab_bin: str, environ: Mapping[str, str] | None = None, timeout_s: float = 30.0
) -> str | None:
    """Why the emulator behind `colab_bin` cannot give the job's user its VMs (one line with
    the fix), or None (reachable, or the real CLI)."""
    admin = emulator_admin(colab_bin)
    if admin is None:
        return None
    try:
        done = subprocess.run(
            [str(admin), "reach"], env=dict(os.environ if environ is None else environ),
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the Colab emulator's `{admin} reach` could not run ({exc})"
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
    return lines[-1].removeprefix(f"{ADMIN_NAME}: ")
