"""The VM's "kernel" for one `colab exec`: a detached supervisor plus a fresh `python3 -u`.

`colab exec` writes a job folder (`code.py`, `job.json` with the new `--env` values, empty
`stdout`/`stderr`) and starts this supervisor in its own session. The supervisor takes the VM's
kernel lock (so execs on one VM run one after the other), merges the `--env` values into the VM's
persisted kernel environment, runs the code with cwd = the VM's `/content` and its output going to
the job's files, and writes `status.json` when the code is done. Killing the client changes
nothing here, exactly like the real kernel.
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

# Runs the cell like IPython would for our purposes: `__name__ == "__main__"`, an exception or
# SystemExit is reported on stderr and the "kernel" carries on (exit status 0).
BOOTSTRAP = r"""
import sys, traceback
def _colab_emu_run(path):
    with open(path, encoding="utf-8") as fh:
        source = fh.read()
    del sys.argv[1:]
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        exec(compile(source, path, "exec"), namespace)
    except SystemExit as exc:
        sys.stdout.flush()
        code = "" if exc.code is None else ": %s" % (exc.code,)
        sys.stderr.write("An exception has occurred, use %tb to see the full traceback.\n\n")
        sys.stderr.write("SystemExit%s\n" % code)
    except BaseException as exc:
        sys.stdout.flush()
        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
    sys.stdout.flush()
    sys.stderr.flush()
_colab_emu_run(sys.argv[1])
"""


def kernel_environment(
    base: Mapping[str, str], paths: VmPaths, port: int | None, persisted: Mapping[str, str]
) -> dict[str, str]:
    """The code's environment: the client's allow-listed base, Colab's presets, then `--env`."""
    env = dict(base)
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
        env = kernel_environment(os.environ, paths, runtime_port(emu_home, endpoint), persisted)
        write_json(job_dir / "started.json", {"pid": os.getpid(), "at": time.time()})
        with (
            open(job_dir / "stdout", "ab", buffering=0) as out,
            open(job_dir / "stderr", "ab", buffering=0) as err,
        ):
            proc = subprocess.Popen(
                [sys.executable, "-u", "-c", BOOTSTRAP, str(job_dir / "code.py")],
                cwd=paths.content,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
            )
            rc = proc.wait()
        write_json(job_dir / "status.json", {"rc": rc, "finished_at": time.time()})
    return 0
