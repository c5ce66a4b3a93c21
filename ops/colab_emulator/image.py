"""What a VM's job user can reach: the VM's folder, and what Colab's image gives every VM
besides the kernel (`uv`, and on a GPU VM `nvidia-smi`), wherever the emulator and its Python
live.

Every user of a VM reaches its `/`: run as root, colabq's wrapper runs the job as an
unprivileged user, who must reach the VM's folder and run its tools, as on Colab. So, run as
root (a user other than root switches to nobody, so its own folders are always reachable):

- **The VM's folder.** When the emulator home lies below a folder others cannot search (a home
  of mode 0700, pytest's temporary folders), the VM's folder is made in `colab-emu-vms/` under
  the system's temporary folder (`TMPDIR`, else `/tmp`; the folder root's alone, 0711),
  `vms/<endpoint>` links to it, and the release moves it back (`place_reachable`).
- **Its tools.** `/opt/bin/uv` is the host's uv (the one beside the emulator's Python, else the
  one on PATH): a link to it when every user can run it there, else to a copy kept once per uv
  binary in `colab-emu-vms/image/` (a clone's `.venv` in a private folder; never removed, like
  a cache: one file per uv build). The nvidia-smi shim
  runs a copy of nvidia_smi.py beside the VM's gpu.json, never the emulator's own files.
- **Where neither can be had** (the emulator home and `TMPDIR` both private), `reach_problem`
  says so in one line with the fix (`colab-emu reach`; colabq's worker refuses to start on it).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

SHARED_NAME = "colab-emu-vms"
SMI_SOURCE = Path(__file__).resolve().with_name("nvidia_smi.py")
# The shim's boot: nvidia_smi.py is standard library only, and runs from the VM's own copy.
_SMI_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); import nvidia_smi; "
    "sys.exit(nvidia_smi.main(sys.argv[2:]))"
)


def job_user_switches() -> bool:
    """Whether a wrapper on this host's VMs runs the job as another user (it does as root)."""
    return os.geteuid() == 0


def blocker(path: Path) -> Path | None:
    """The first folder from `/` down to `path` (included) that other users cannot search (or
    that is missing), or None when every user can reach `path`."""
    for folder in (*reversed(path.parents), path):
        try:
            if not folder.stat().st_mode & stat.S_IXOTH:
                return folder
        except OSError:
            return folder
    return None


def reachable(path: Path) -> bool:
    """Whether every user can reach `path` (and search it, or run it)."""
    return blocker(path) is None


def shared_dir() -> Path | None:
    """`colab-emu-vms/` under the system's temporary folder, root's alone and reachable by all,
    created if missing; None when it cannot be (TMPDIR private, or the folder not root's)."""
    shared = Path(tempfile.gettempdir()) / SHARED_NAME
    try:
        shared.mkdir(mode=0o711, exist_ok=True)
        info = shared.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o022:
        return None  # not ours alone
    return shared if reachable(shared) else None


class Reach(NamedTuple):
    """Where a new VM's folder goes (`shared` None: below the emulator home), or why the job's
    user could reach none (`problem`)."""

    shared: Path | None
    problem: str | None = None


def reach(emu_home: Path) -> Reach:
    """Where this emulator home's VMs go, as `place_reachable` decides it."""
    vms = emu_home / "vms"
    if not job_user_switches():
        return Reach(None)
    with contextlib.suppress(OSError):
        vms.mkdir(parents=True, exist_ok=True)
    if reachable(vms):
        return Reach(None)
    shared = shared_dir()
    if shared is not None:
        return Reach(shared)
    tmp = Path(tempfile.gettempdir())
    home_blocker = blocker(vms)
    if (tmp_blocker := blocker(tmp)) is not None:
        fallback = f"their fallback under TMPDIR ({tmp_blocker} is mode {_mode(tmp_blocker)})"
    else:
        fallback = f"their fallback {tmp / SHARED_NAME}, which is not root's alone"
    return Reach(
        None,
        f"the emulator's VMs would lie in {vms}, which the job's user cannot reach "
        f"({home_blocker} is mode {_mode(home_blocker)}), nor {fallback}: set "
        "COLAB_EMU_HOME to a folder every user can search (e.g. COLAB_EMU_HOME=/tmp/colab-emu) "
        "or TMPDIR=/tmp",
    )


def reach_problem(emu_home: Path) -> str | None:
    return reach(emu_home).problem


def _mode(path: Path | None) -> str:
    try:
        return f"{stat.S_IMODE(path.stat().st_mode):04o}" if path else "?"
    except OSError:
        return "missing"


def place_reachable(base: Path) -> Path:
    """The VM's folder `base` (`vms/<endpoint>`) where every user can reach it: itself, or a
    folder in the shared one that `base` links to. Returns its real path."""
    shared = reach(base.parent.parent).shared
    if shared is None:
        return base
    try:
        real = Path(tempfile.mkdtemp(prefix=f"{base.name}-", dir=shared))
        real.chmod(0o755)
        base.symlink_to(real)
    except OSError:
        return base
    return real


def host_uv() -> Path | None:
    """The uv a VM gets: the one beside the emulator's Python (a venv's), else the one on PATH."""
    here = Path(sys.executable).parent / "uv"
    if here.is_file():
        return here
    found = shutil.which("uv")
    return Path(found) if found else None


def runnable_copy(program: Path) -> Path | None:
    """`program` where every user can run it: itself, else a copy in the shared image folder
    (made once per binary), else None."""
    real = program.resolve()
    if not job_user_switches() or reachable(real):
        return real
    shared = shared_dir()
    if shared is None:
        return None
    key = _fingerprint(real)
    image = shared / "image"
    folder = image / f"{real.name}-{key}"
    if (folder / real.name).is_file():
        return folder / real.name
    try:
        image.mkdir(mode=0o755, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".copy-", dir=image))
        shutil.copy2(real, staging / real.name)
        (staging / real.name).chmod(0o755)
        staging.chmod(0o755)
        try:
            staging.rename(folder)  # another VM's copy may have won the race: either will do
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
    except OSError:
        return None
    return folder / real.name if (folder / real.name).is_file() else None


def _fingerprint(path: Path) -> str:
    """A key for one binary wherever it lies (a clone's copy or link of another's shares it):
    its size, time and its first and last 64 KiB, cheaper than hashing 40 MB per VM."""
    info = path.stat()
    digest = hashlib.sha256(f"{info.st_size}\0{info.st_mtime_ns}\0".encode())
    with open(path, "rb") as fh:
        digest.update(fh.read(65536))
        fh.seek(max(info.st_size - 65536, 0))
        digest.update(fh.read(65536))
    return digest.hexdigest()[:16]


def install_uv(bin_dir: Path) -> Path | None:
    """`uv` in the VM's /opt/bin `bin_dir`: a link to a uv the job's user can run (the binary
    is large and never changes); None when the host has none, or none that user can run."""
    uv = host_uv()
    target = runnable_copy(uv) if uv is not None else None
    if target is not None:
        with contextlib.suppress(FileExistsError):
            (bin_dir / "uv").symlink_to(target)
    return target


def install_smi(base: Path, bin_dir: Path, gpu_json: Path) -> None:
    """An `nvidia-smi` shim in `bin_dir` that runs the VM's own copy of nvidia_smi.py (beside
    gpu.json, outside the VM's `/`) on `gpu_json`: with the emulator's Python, else (for a user
    who cannot run that one: the job's) the first python3 on PATH."""
    shutil.copyfile(SMI_SOURCE, base / "nvidia_smi.py")
    (base / "nvidia_smi.py").chmod(0o644)
    args = shlex.join(["-c", _SMI_BOOT, str(base), str(gpu_json)])
    exe = shlex.quote(sys.executable)
    shim = bin_dir / "nvidia-smi"
    shim.write_text(
        f'#!/bin/sh\n[ -x {exe} ] && exec {exe} {args} "$@"\nexec python3 {args} "$@"\n'
    )
    shim.chmod(0o755)
