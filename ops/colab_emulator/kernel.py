"""The VM's "kernel" for one `colab exec`: a detached supervisor plus a fresh `python3 -u`.

`colab exec` writes a job folder (`code.py`: the cell, `--env` prelude included; `job.json` with the
new `--env` values; empty `stdout`/`stderr`) and starts this supervisor in its own session (so its
process group is "the kernel" that `colab restart-kernel` kills). The supervisor takes the VM's
kernel lock (so execs on one VM run one after the other), merges the `--env` values into the VM's
persisted kernel environment, runs the code with cwd = the VM's `/content` and its output going to
the job's files, and writes `status.json` when the code is done. Killing the client changes
nothing here, exactly like the real kernel. The VM's execution counter (`In[N]` in tracebacks)
lives in `kernel/execution_count.json`; a kernel restart resets it and the persisted `--env`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from .backend import Backend
from .jsonfile import locked, read_json, write_json
from .vm import VmPaths, runtime_port, vm_paths

COLAB_PRESETS = {
    "UV_SYSTEM_PYTHON": "true",
    "PYTHONPATH": "/env/python",
    "MPLBACKEND": "module://matplotlib_inline.backend_inline",
}

# Runs the cell like IPython would for our purposes: `__name__ == "__main__"`, and an exception
# or SystemExit is reported on stderr the way `colab exec` prints the kernel's `error` output
# (IPython's coloured traceback, formatted by ipytb.py, loaded only then); the "kernel" carries on
# (exit status 0). Arguments: the cell file, its execution count (`In[N]`), ipytb.py's path.
BOOTSTRAP = r"""
import sys
def _colab_emu_run(path, count, formatter):
    with open(path, encoding="utf-8") as fh:
        source = fh.read()
    del sys.argv[1:]
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}

    def report(exc, mode):
        sys.stdout.flush()
        try:
            from importlib.util import module_from_spec, spec_from_file_location
            spec = spec_from_file_location("_colab_emu_ipytb", formatter)
            module = module_from_spec(spec)
            spec.loader.exec_module(module)
            text = module.render(exc, mode, {path: count})
        except Exception:
            import traceback
            text = "".join(traceback.format_exception(exc))
        sys.stderr.write(text)
        sys.stderr.flush()

    try:
        code = compile(source, path, "exec")
    except (OverflowError, SyntaxError, ValueError, TypeError, MemoryError) as exc:
        report(exc, "syntax")
        return
    try:
        exec(code, namespace)
    except SystemExit as exc:
        report(exc, "exit")
    except BaseException as exc:
        report(exc, "verbose")
    sys.stdout.flush()
    sys.stderr.flush()
_colab_emu_run(sys.argv[1], int(sys.argv[2]), sys.argv[3])
"""
FORMATTER = Path(__file__).resolve().with_name("ipytb.py")


def vm_path(host_path: str, paths: VmPaths) -> str:
    """The VM's `/opt/bin` first, then the host's PATH without any folder holding an
    `nvidia-smi` (a CPU VM on a GPU host must not find the host's GPU)."""
    kept = [
        folder
        for folder in host_path.split(os.pathsep)
        if folder and not os.path.exists(os.path.join(folder, "nvidia-smi"))
    ]
    return os.pathsep.join([str(paths.bin_dir), *kept])


def kernel_environment(
    base: Mapping[str, str], paths: VmPaths, port: int | None, persisted: Mapping[str, str]
) -> dict[str, str]:
    """The code's environment: the client's allow-listed base (PATH with the VM's /opt/bin
    first), Colab's presets, then `--env`."""
    env = dict(base)
    paths = VmPaths(paths.base.resolve())  # where every user can reach it (vm.place_reachable)
    env["PATH"] = vm_path(base.get("PATH", os.defpath), paths)
    env["HOME"] = str(paths.home)
    env["COLAB_EMU_VM_ROOT"] = str(paths.root)
    env.update(COLAB_PRESETS)
    if port:
        env["TBE_RUNTIME_ADDR"] = f"127.0.0.1:{port}"
    env.update(persisted)
    return env


def main(argv: list[str]) -> int:
    emu_home, endpoint, job_dir = Path(argv[0]), argv[1], Path(argv[2])
    paths = vm_paths(emu_home, endpoint)
    job = read_json(job_dir / "job.json", {})
    with locked(paths.kernel_lock):
        if Backend(emu_home).get(endpoint) is None:
            write_json(job_dir / "status.json", {"rc": None, "aborted": "vm gone"})
            return 0
        persisted = read_json(paths.kernel_env, {})
        persisted.update(job.get("env", {}))
        write_json(paths.kernel_env, persisted)
        # The CLI's `/content` prelude and the cell each take an execution count (`In[N]`).
        count = int(read_json(paths.execution_count, 0) or 0) + 2
        write_json(paths.execution_count, count)
        env = kernel_environment(os.environ, paths, runtime_port(emu_home, endpoint), persisted)
        write_json(job_dir / "started.json", {"pid": os.getpid(), "at": time.time()})
        with (
            open(job_dir / "stdout", "ab", buffering=0) as out,
            open(job_dir / "stderr", "ab", buffering=0) as err,
        ):
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-u",
                    "-c",
                    BOOTSTRAP,
                    str(job_dir / "code.py"),
                    str(count),
                    str(FORMATTER),
                ],
                cwd=paths.content,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
            )
            rc = proc.wait()
        # Unassign removes the assignment, then kills the VM's processes one by one: a cell
        # killed before this supervisor never replied (its VM went away under it).
        if Backend(emu_home).get(endpoint) is None:
            write_json(job_dir / "status.json", {"rc": rc, "aborted": "vm gone"})
            return 0
        if rc < 0:
            # The kernel itself was killed (kill-kernel, restart-kernel; this supervisor may
            # outlive it by a moment): a dead kernel never replies.
            return 0
        write_json(job_dir / "status.json", {"rc": rc, "finished_at": time.time()})
    return 0
