"""`colab exec`: validate, send the code to the VM's kernel, stream its output as it arrives.

The client only tails the job's output files, so killing it leaves the remote code running and
`running` set in sessions.json (stale BUSY), as with the real CLI. Exit status never reflects the
remote code; only CLI errors (1/2) and transport failures (TimeoutError, RuntimeError) do.

Like the real client (jupyter-kernel-client 0.9.0 under the CLI), a client whose connection is
gone (the VM unassigned or preempted, its websocket dropped by `colab-emu drop-connections`, or
closed by the proxy when the token it connected with expires: `tokens.py`) does not fail at
once: it waits for its `--timeout` deadline, then raises. Ending past the deadline costs 10 s
more (the real client's `Failed to stop websocket connection thread.`), except after the
proxy's close, which ended that thread already. Its
`finally` writes back the record it read at the start (`store.add`), so an exec that outlives
its session re-creates the record.

The real client also outlives its cell: after the reply and the write-back it closes its
websocket and threads, which takes a second or more (several on a loaded host). The `exec` fault
field `linger_s` reproduces that: the client stays alive that long after its output was written,
then exits with the code it would have had.
"""

from __future__ import annotations

import os
import re
import sys
import time
from typing import Any

from .context import EmuContext
from .errors import CliExit
from .faults import apply_delay, take_fault
from .ids import random_hex, random_uuid
from .jsonfile import read_json, write_json
from .output import echo, write_bytes
from .session_ops import backend_for, get_session, prune, resolve_session, store_for
from .store import local_time_str, log_debug, record_history
from .tokens import proxy_rejects, token_expiry
from .vm import MARK_VAR, connection_generation, mark_for, spawn_detached, vm_paths

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
# Past its deadline the real client takes about 10 s longer to exit (it fails to stop its
# websocket thread). Fixed on purpose: colabq must live with it.
EXIT_DELAY_S = 10.0
EXIT_DELAY_LOG = "Failed to stop websocket connection thread."
TIMEOUT_MESSAGE = "Timeout waiting for reply"
LOST_MESSAGE = "Connection was lost."
TOKEN_CLOSE = "proxy token expired"


class ProxyClosed(RuntimeError):
    """`RuntimeError: Connection was lost.` after the proxy closed the websocket (its token
    expired): printed as the builtin, told apart only for the exit delay."""


ProxyClosed.__module__ = "builtins"
ProxyClosed.__name__ = ProxyClosed.__qualname__ = "RuntimeError"


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
    """(label, code), or None for empty stdin (the real CLI then runs nothing, exit 0).

    The label is `-f` as given (the real `running` is `exec(<file or stdin>)`). A missing file
    is the real CLI's `open(file)`: a FileNotFoundError traceback, exit 1.
    """
    path = opts.get("file")
    if path:
        if path.endswith(".ipynb"):
            echo("[colab-emulator] Notebook (.ipynb) execution is not emulated.", err=True)
            raise CliExit(2)
        with open(path, encoding="utf-8") as fh:
            code = fh.read()
        return (path, code) if code.strip() else None
    if sys.stdin is None or sys.stdin.isatty():
        echo("[colab] Error: No input provided. Pipe code or provide a file.")
        raise CliExit(1)
    code = sys.stdin.read()
    return ("stdin", code) if code.strip() else None


def _wait_until(deadline: float) -> None:
    while time.monotonic() < deadline:
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))


def connection_lost(deadline: float, fault: dict[str, Any]) -> BaseException:
    """What a client whose connection is gone raises, once its deadline has passed."""
    _wait_until(deadline)
    if fault.get("on_lost") == "timeout":
        return TimeoutError(TIMEOUT_MESSAGE)
    return RuntimeError(LOST_MESSAGE)


def run_on_kernel(
    ctx: EmuContext,
    endpoint: str,
    code: str,
    envs: dict[str, str],
    deadline: float,
    fault: dict[str, Any],
    token_expires_epoch: float = float("inf"),
) -> list[dict[str, str]]:
    """Submit `code` to the VM's kernel and stream its output until it is done.

    A VM that goes away, or a dropped connection, ends the streaming; the client then waits for
    its deadline and raises RuntimeError (or TimeoutError with `on_lost: "timeout"`). So does
    the proxy's close at `token_expires_epoch` (ProxyClosed). A kernel that dies (kill-kernel,
    restart-kernel) never replies: TimeoutError at the deadline.
    """
    if fault.get("hang"):
        _wait_until(deadline)
        raise TimeoutError(TIMEOUT_MESSAGE)
    paths = vm_paths(ctx.emu_home, endpoint)
    generation = connection_generation(ctx.emu_home, endpoint)
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
                    text = chunk.decode(errors="replace")
                    outputs.append({"output_type": "stream", "name": stream, "text": text})

        next_vm_check = 0.0
        while True:
            # A dropped websocket delivers nothing more: check the marker before every read.
            if connection_generation(ctx.emu_home, endpoint) != generation:
                log_debug(ctx, f"websocket to {endpoint} closed: connection dropped")
                raise connection_lost(deadline, fault)
            if time.time() >= token_expires_epoch:
                # What the kernel writes from now on never reaches this client.
                log_debug(ctx, f"websocket to {endpoint} closed by the proxy: {TOKEN_CLOSE}")
                _wait_until(deadline)
                raise ProxyClosed(LOST_MESSAGE)
            drain()
            if status_path.exists():
                drain()
                if read_json(status_path, {}).get("aborted"):
                    raise connection_lost(deadline, fault)
                return outputs
            now = time.monotonic()
            if now >= next_vm_check:
                next_vm_check = now + VM_CHECK_S
                if backend.get(endpoint) is None:
                    drain()  # what the VM wrote before it went away was already on the wire
                    log_debug(ctx, f"websocket to {endpoint} closed: the VM is gone")
                    raise connection_lost(deadline, fault)
            if proc.poll() is not None and not status_path.exists() and now >= deadline:
                # A dead kernel on a live VM never replies; a VM that went away (its kernel
                # with it) is a lost connection, however late this loop looks (a loaded host).
                if backend.get(endpoint) is None:
                    drain()
                    raise connection_lost(deadline, fault)
                raise TimeoutError(TIMEOUT_MESSAGE)
            time.sleep(POLL_S)


def cmd_exec(ctx: EmuContext, opts: dict[str, Any]) -> int:
    envs = parse_envs(opts.get("env") or [])
    name = resolve_session(ctx, opts.get("session"))
    record = get_session(ctx, name)
    got = read_code(opts)
    if got is None:
        return 0
    source, code = got
    fault = take_fault(ctx.emu_home, "exec", name)
    apply_delay({"delay_s": fault.get("delay_s", 0)})
    store = store_for(ctx)
    expired = proxy_rejects(backend_for(ctx), record, ctx.environ)
    token_expires = token_expiry(backend_for(ctx), record, ctx.environ) or float("inf")
    if expired:
        log_debug(ctx, f"GET {record['url']}/api/kernels -> 401 (proxy token expired)")
    if fault.get("lost") or expired or backend_for(ctx).get(record["endpoint"]) is None:
        echo(f"[colab] Session '{name}' appears to be lost (404/401). Cleaning up.")
        prune(ctx, [name], announce=False)
        raise CliExit(1)
    if not record.get("kernel_id"):
        # A new kernel was started: the real on_kernel_started/on_session_started callbacks.
        record["kernel_id"] = random_uuid()
        record["session_id"] = random_uuid()
        store.add(record)
    full_code = env_prelude(envs) + code if envs else code
    log_debug(ctx, f"execute_request session={name} code={full_code!r}")
    # The real exec keeps the record it read in get_session and writes that whole object back
    # (`state.store.add(s)`) each time, here and in `finally`.
    record["running"] = f"exec({source})"
    record["last_execution"] = [source, None, local_time_str()]
    store.add(record)
    deadline = time.monotonic() + opts.get("timeout", 30.0)
    closed = False
    try:
        outputs = run_on_kernel(
            ctx, record["endpoint"], full_code, envs, deadline, fault, token_expires
        )
        record_history(
            ctx, name, "execution", code=full_code, outputs=outputs, cell_index=None, cell_id=None
        )
    except ProxyClosed:
        closed = True  # its websocket thread ended with the close: nothing to fail to stop
        raise
    finally:
        record["running"] = None
        store.add(record)
        if time.monotonic() >= deadline and not closed:
            log_debug(ctx, EXIT_DELAY_LOG)
            time.sleep(EXIT_DELAY_S)
        linger(ctx, fault)
    return 0


def linger(ctx: EmuContext, fault: dict[str, Any]) -> None:
    """`linger_s`: the client's slow exit (closing its websocket and threads), after the cell's
    output and the record's write-back; whatever the cell started runs on meanwhile."""
    linger_s = float(fault.get("linger_s") or 0)
    if linger_s > 0:
        sys.stdout.flush()
        sys.stderr.flush()
        log_debug(ctx, f"exec client {os.getpid()} lingering {linger_s:g} s after its cell")
        time.sleep(linger_s)
