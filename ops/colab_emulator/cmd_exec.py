"""`colab exec`: validate, send the code to the VM's kernel, stream its output as it arrives.

The client only tails the job's output files, so killing it leaves the remote code running and
`running` set in sessions.json (stale BUSY), as with the real CLI. Exit status never reflects the
remote code; only CLI errors (1/2) and transport failures (TimeoutError, RuntimeError) do.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from .context import EmuContext
from .errors import CliExit, UsageError
from .faults import apply_delay, take_fault
from .ids import random_hex, random_uuid
from .jsonfile import read_json, write_json
from .output import echo, write_bytes
from .session_ops import backend_for, get_session, resolve_session, store_for
from .store import local_time_str, log_debug, record_history
from .vm import MARK_VAR, mark_for, spawn_detached, vm_paths

ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
BASE_ENV_KEYS = (
    "PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TERM",
    "TMPDIR",
    "USER",
    "LOGNAME",
    "SHELL",
)
POLL_S = 0.02
VM_CHECK_S = 0.2


def parse_envs(values: list[str]) -> dict[str, str]:
    envs: dict[str, str] = {}
    for value in values:
        if "=" not in value:
            echo(f"[colab] Invalid --env value '{value}'. Expected KEY=VALUE.", err=True)
            raise CliExit(2)
        key, val = value.split("=", 1)
        if not ENV_KEY.match(key):
            echo(
                f"[colab] Invalid --env key '{key}'. Expected a valid environment variable name.",
                err=True,
            )
            raise CliExit(2)
        envs[key] = val
    return envs


def env_prelude(envs: dict[str, str]) -> str:
    return "import os\n" + "".join(f"os.environ[{k!r}] = {v!r}\n" for k, v in envs.items())


def read_code(opts: dict[str, Any]) -> tuple[str, str] | None:
    """(source label, code), or None for empty stdin (the real CLI then runs nothing, exit 0)."""
    path = opts.get("file")
    if path:
        if not os.path.isfile(path):
            raise UsageError(
                f"Invalid value for '-f' / '--file': File '{path}' does not exist.", "exec"
            )
        if path.endswith(".ipynb"):
            echo("[colab-emulator] Notebook (.ipynb) execution is not emulated.", err=True)
            raise CliExit(2)
        return Path(path).name, Path(path).read_text(encoding="utf-8")
    if sys.stdin is None or sys.stdin.isatty():
        echo("[colab] Error: No input provided. Pipe code or provide a file.")
        raise CliExit(1)
    code = sys.stdin.read()
    return ("stdin", code) if code.strip() else None


def _wait_until(deadline: float) -> None:
    while time.monotonic() < deadline:
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))


def run_on_kernel(
    ctx: EmuContext,
    endpoint: str,
    code: str,
    envs: dict[str, str],
    timeout_s: float,
    fault: dict[str, Any],
) -> list[dict[str, str]]:
    """Submit `code` to the VM's kernel and stream its output until it is done."""
    deadline = time.monotonic() + timeout_s
    if fault.get("hang"):
        _wait_until(deadline)
        raise TimeoutError("Timeout waiting for reply")
    paths = vm_paths(ctx.emu_home, endpoint)
    job_dir = paths.jobs / f"{time.time_ns()}-{random_hex(6)}"
    job_dir.mkdir(parents=True)
    (job_dir / "code.py").write_text(code, encoding="utf-8")
    write_json(job_dir / "job.json", {"env": envs})
    for name in ("stdout", "stderr"):
        (job_dir / name).touch()
    env = {k: ctx.environ[k] for k in (*BASE_ENV_KEYS, *ctx.passthrough) if k in ctx.environ}
    env[MARK_VAR] = mark_for(ctx.emu_home, endpoint)
    proc = spawn_detached(
        "kernel",
        [str(ctx.emu_home), endpoint, str(job_dir)],
        env,
        job_dir / "kernel.log",
        paths.base,
    )
    backend = backend_for(ctx)
    outputs: list[dict[str, str]] = []
    status_path = job_dir / "status.json"
    with (
        open(job_dir / "stdout", "rb", buffering=0) as out,
        open(job_dir / "stderr", "rb", buffering=0) as err,
    ):

        def drain() -> None:
            for fh, stream in ((out, "stdout"), (err, "stderr")):
                chunk = fh.read()
                if chunk:
                    write_bytes(chunk, err=stream == "stderr")
                    outputs.append({"stream": stream, "text": chunk.decode(errors="replace")})

        next_vm_check = 0.0
        while True:
            drain()
            if status_path.exists():
                drain()
                if read_json(status_path, {}).get("aborted"):
                    raise RuntimeError("Connection was lost.")
                return outputs
            now = time.monotonic()
            if now >= next_vm_check:
                next_vm_check = now + VM_CHECK_S
                if backend.get(endpoint) is None:
                    drain()
                    if fault.get("on_lost") == "timeout":
                        _wait_until(deadline)
                        raise TimeoutError("Timeout waiting for reply")
                    raise RuntimeError("Connection was lost.")
            if proc.poll() is not None and not status_path.exists() and now >= deadline:
                raise TimeoutError("Timeout waiting for reply")
            time.sleep(POLL_S)


def cmd_exec(ctx: EmuContext, opts: dict[str, Any]) -> int:
    envs = parse_envs(opts.get("env") or [])
    got = read_code(opts)
    if got is None:
        return 0
    source, code = got
    name = resolve_session(ctx, opts.get("session"))
    record = get_session(ctx, name)
    fault = take_fault(ctx.emu_home, "exec", name)
    apply_delay({"delay_s": fault.get("delay_s", 0)})
    store = store_for(ctx)
    if fault.get("lost") or backend_for(ctx).get(record["endpoint"]) is None:
        echo(f"[colab] Session '{name}' appears to be lost (404/401). Cleaning up.")
        store.remove(name)
        raise CliExit(1)
    full_code = env_prelude(envs) + code if envs else code
    log_debug(ctx, f"execute_request session={name} code={full_code!r}")
    label = f"exec({source})"

    def start(record: dict[str, Any]) -> None:
        if not record.get("kernel_id"):
            record["kernel_id"] = random_uuid()
            record["session_id"] = random_uuid()
        record["running"] = label
        record["last_execution"] = [source, None, local_time_str()]

    store.update(name, start)
    try:
        outputs = run_on_kernel(
            ctx, record["endpoint"], code, envs, opts.get("timeout", 30.0), fault
        )
        record_history(ctx, name, "execution", source=source, code=full_code, outputs=outputs)
    finally:
        store.update(name, lambda record: record.update(running=None))
    return 0
