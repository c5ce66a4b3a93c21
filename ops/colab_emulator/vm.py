"""One sandbox per VM: its folder layout, its detached processes, and killing all of them.

`vms/<endpoint>/root/` stands for the VM's `/` (so `/content` is `root/content`). Every process
that belongs to a VM carries `COLAB_EMU_VM_MARK=<emu home>::<endpoint>` in its environment, which
is how unassign finds and kills them all, including children that left the kernel's process
group (Linux `/proc`). Released VMs are moved to `released/<endpoint>/` for post-mortems.
A GPU VM also gets its GPU (`gpu.json`) and an `nvidia-smi` in its `/opt/bin` (nvidia_smi.py).
Every VM gets `uv` in its `/opt/bin`, as Colab's image has it.

Every user can reach a VM's folder and run its tools, as every user of a VM can: run as root, a
VM's wrapper runs the job as an unprivileged user. Where the folder and the tools go so that
they can (never a link into a folder that user cannot enter) is image.py's; the kernel's own
folder stays root's (0700).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from .image import install_smi, install_uv, place_reachable
from .jsonfile import locked, read_json, write_json
from .nvidia_smi import CUDA_VERSION, GPU_MODELS, gpu_state

MARK_VAR = "COLAB_EMU_VM_MARK"
KERNEL_MODULE = "colab_emulator.kernel"
OPS_DIR = Path(__file__).resolve().parent.parent
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); from importlib import import_module; "
    "sys.exit(import_module(sys.argv[2]).main(sys.argv[3:]))"
)
GPU_MODE = 0o644  # any user's nvidia-smi reads it (the job's user, under a root wrapper)
SAMPLE_README = "This directory includes a few sample datasets to get you started.\n"


class VmPaths(NamedTuple):
    base: Path

    @property
    def root(self) -> Path:
        return self.base / "root"

    @property
    def content(self) -> Path:
        return self.root / "content"

    @property
    def home(self) -> Path:
        return self.root / "root"

    @property
    def bin_dir(self) -> Path:
        """The VM's `/opt/bin`, first on the kernel's PATH (a GPU VM's nvidia-smi is there)."""
        return self.root / "opt" / "bin"

    @property
    def gpu(self) -> Path:
        """The VM's GPU as nvidia-smi reports it (absent on CPU and TPU VMs)."""
        return self.base / "gpu.json"

    @property
    def state(self) -> Path:
        return self.base / "vm.json"

    @property
    def server_log(self) -> Path:
        return self.base / "runtime-server.log"

    @property
    def kernel_dir(self) -> Path:
        return self.base / "kernel"

    @property
    def kernel_lock(self) -> Path:
        return self.kernel_dir / "lock"

    @property
    def kernel_env(self) -> Path:
        return self.kernel_dir / "env.json"

    @property
    def jobs(self) -> Path:
        return self.kernel_dir / "jobs"

    @property
    def execution_count(self) -> Path:
        return self.kernel_dir / "execution_count.json"

    @property
    def connections(self) -> Path:
        """`{"generation": N}`: bumped by `colab-emu drop-connections` (see cmd_exec)."""
        return self.kernel_dir / "connections.json"


def vm_paths(emu_home: Path, endpoint: str) -> VmPaths:
    return VmPaths(emu_home / "vms" / endpoint)


def mark_for(emu_home: Path, endpoint: str) -> str:
    return f"{emu_home}::{endpoint}"


def spawn_detached(
    module: str, args: list[str], env: Mapping[str, str], log_path: Path, cwd: Path
) -> subprocess.Popen[bytes]:
    """Start `colab_emulator.<module>.main(args)` in its own session, stdio away from the caller."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-c", _BOOT, str(OPS_DIR), f"colab_emulator.{module}", *args],
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )


def install_gpu(paths: VmPaths, accelerator: str, cuda_version: str = CUDA_VERSION) -> None:
    """The VM's GPU: gpu.json, and an `nvidia-smi` in its /opt/bin that reports it."""
    write_json(paths.gpu, gpu_state(accelerator, cuda_version), mode=GPU_MODE)
    install_smi(paths.base, paths.bin_dir, paths.gpu)


def set_gpu(emu_home: Path, endpoint: str, **values: int | str) -> dict[str, object]:
    """Change what the VM's nvidia-smi reports (`utilization_gpu`, `memory_used_mib`,
    `cuda_version`)."""
    path = vm_paths(emu_home, endpoint).gpu
    state = read_json(path, None)
    if not isinstance(state, dict):
        raise FileNotFoundError(f"{endpoint} has no GPU ({path} is missing)")
    state.update(values)
    write_json(path, state, mode=GPU_MODE)
    return state


def create_vm(
    emu_home: Path,
    endpoint: str,
    environ: Mapping[str, str],
    accelerator: str = "NONE",
    cuda_version: str = CUDA_VERSION,
) -> int:
    """Lay out the VM folder (with its GPU, if any, and uv) and start its runtime server;
    returns the server's port."""
    paths = place_vm(vm_paths(emu_home, endpoint))
    for folder in (
        paths.content / "sample_data", paths.home, paths.root / "tmp", paths.jobs, paths.bin_dir
    ):  # fmt: skip
        folder.mkdir(parents=True, exist_ok=True)
    paths.kernel_dir.chmod(0o700)
    (paths.content / "sample_data" / "README.md").write_text(SAMPLE_README)
    install_uv(paths.bin_dir)
    if accelerator in GPU_MODELS:
        install_gpu(paths, accelerator, cuda_version)
    env = {k: v for k, v in environ.items() if k in ("PATH", "LANG", "COLAB_EMU_TIME_SCALE")}
    env[MARK_VAR] = mark_for(emu_home, endpoint)
    spawn_detached("runtime_server", [str(emu_home), endpoint], env, paths.server_log, paths.base)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        port = runtime_port(emu_home, endpoint)
        if port:
            return port
        time.sleep(0.01)
    raise RuntimeError(f"runtime server of {endpoint} did not start (see {paths.server_log})")


def place_vm(paths: VmPaths) -> VmPaths:
    """The VM's folder where every user can reach it (image.place_reachable); its real path."""
    return VmPaths(place_reachable(paths.base))


def runtime_port(emu_home: Path, endpoint: str) -> int | None:
    state = read_json(vm_paths(emu_home, endpoint).state, {})
    port = state.get("port") if isinstance(state, dict) else None
    return port if isinstance(port, int) else None


def _environ_of(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def _args_of(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().decode(errors="replace").split("\0")
    except OSError:
        return []


def _cmdline_of(pid: int) -> str:
    args = _args_of(pid)
    # The bootstrap and kernel code passed with -c are long; they say nothing in a listing.
    return " ".join(arg if len(arg) <= 60 else "<…>" for arg in args if arg)


def find_processes(mark: str, *, prefix: bool = False) -> list[tuple[int, str, str]]:
    """(pid, mark, cmdline) of live processes whose mark equals `mark` (or starts with it)."""
    wanted = f"{MARK_VAR}={mark}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        for item in _environ_of(int(entry)).split(b"\0"):
            if item == wanted or (prefix and item.startswith(wanted)):
                found.append((int(entry), item.decode().split("=", 1)[1], _cmdline_of(int(entry))))
                break
    return found


def kill_marked(mark: str, *, prefix: bool = False, exclude_pid: int | None = None) -> int:
    """SIGKILL every marked process (and the groups they lead) until none is left."""
    killed: set[int] = set()
    for _ in range(100):
        pids = [pid for pid, _, _ in find_processes(mark, prefix=prefix) if pid != exclude_pid]
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(OSError):
                if os.getpgid(pid) == pid and pid != exclude_pid:
                    os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        time.sleep(0.02)
    return len(killed)


def destroy_vm(emu_home: Path, endpoint: str, *, exclude_pid: int | None = None) -> None:
    """Kill the VM's processes and move its folder to `released/`."""
    kill_marked(mark_for(emu_home, endpoint), exclude_pid=exclude_pid)
    paths = vm_paths(emu_home, endpoint)
    if paths.base.exists() or paths.base.is_symlink():
        target = emu_home / "released" / endpoint
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)
        if paths.base.is_symlink():  # placed where all can reach it: moved back
            with contextlib.suppress(OSError):
                real = paths.base.resolve()
                paths.base.unlink()  # whoever removes the link moves the folder
                shutil.move(real, target)
            return
        with contextlib.suppress(OSError):
            paths.base.rename(target)


def connection_generation(emu_home: Path, endpoint: str) -> int:
    """How many times the VM's websocket connections were dropped (0 if never, or VM gone)."""
    data = read_json(vm_paths(emu_home, endpoint).connections, {})
    value = data.get("generation", 0) if isinstance(data, dict) else 0
    return value if isinstance(value, int) else 0


def drop_connections(emu_home: Path, endpoint: str) -> int:
    """Bump the generation: every exec client attached now loses its connection."""
    paths = vm_paths(emu_home, endpoint)
    with locked(paths.kernel_dir / "connections.lock"):
        generation = connection_generation(emu_home, endpoint) + 1
        write_json(paths.connections, {"generation": generation})
    return generation


def kernel_supervisors(emu_home: Path, endpoint: str) -> list[int]:
    """Pids of the VM's kernel supervisors (kernel.py): running cells and cells queued for one."""
    return [
        pid
        for pid, _, _ in find_processes(mark_for(emu_home, endpoint))
        if KERNEL_MODULE in _args_of(pid)
    ]


def restart_kernel(emu_home: Path, endpoint: str) -> int:
    """Kill "the kernel": every supervisor and its process group, then reset the kernel state.

    A process that left the kernel's session (`start_new_session=True`, a detached job) is in
    another process group and survives, as does the runtime server. The execution counter and the
    persisted `--env` values belong to the old kernel process and go with it.
    """
    killed: set[int] = set()
    for _ in range(200):
        pids = kernel_supervisors(emu_home, endpoint)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(OSError):
                if os.getpgid(pid) == pid:
                    os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        time.sleep(0.01)
    paths = vm_paths(emu_home, endpoint)
    for state in (paths.execution_count, paths.kernel_env):
        with contextlib.suppress(OSError):
            state.unlink()
    return len(killed)
