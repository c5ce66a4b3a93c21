"""Commands about sessions and their VMs: new, status, sessions, stop, restart-kernel, usage."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from .assign import Refused, request_assignment
from .context import EmuContext
from .errors import COLAB_BASE, AuthRefreshExit, CliExit, RequestsHTTPError, http_error
from .faults import apply_delay, take_fault
from .ids import random_hex, random_uuid
from .output import echo
from .release import release_from
from .session_ops import (
    authenticate,
    backend_for,
    describe,
    get_session,
    not_found,
    raise_http_fault,
    resolve_session,
    store_for,
    sync_sessions,
)
from .store import log_debug, new_record, record_history
from .tokens import proxy_rejects
from .vm import restart_kernel

GPUS = ("a100", "h100", "l4", "t4", "g4")
SINGLE_SHAPE = ("L4", "V5E1", "V6E1")
REFUSED_412 = (
    "[colab] Allocation refused (precondition failed). This can mean too many active sessions, "
    "or a temporary usage or capacity limit for the requested runtime. Run `colab stop` to free "
    "up a session, wait and retry, or try a different accelerator."
)


def hardware_request(gpu: str | None, tpu: str | None) -> tuple[str, str]:
    """(variant, accelerator) as the real flag mapping gives them (unknown GPU -> A100...)."""
    if tpu:
        return "TPU", "V5E1" if tpu.lower() == "v5e1" else "V6E1"
    if gpu:
        return "GPU", gpu.upper() if gpu.lower() in GPUS else "A100"
    return "DEFAULT", "NONE"


def _die(point: str, fault: dict[str, Any]) -> None:
    if fault.get("kill_after") == point:
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def _refused(status: int, accelerator: str) -> CliExit:
    """412 (TooManyAssignmentsError) and 400 for an accelerator: `new`'s friendly lines."""
    if status == 412:
        echo(REFUSED_412, err=True)
    else:
        echo(
            f"[colab] Backend rejected accelerator '{accelerator}'. You may not have quota or "
            "entitlement for this accelerator on your account. Try a different one (e.g. --gpu T4) "
            "or omit --gpu/--tpu for a CPU runtime.",
            err=True,
        )
    return CliExit(1)


def _stall(point: str, fault: dict[str, Any]) -> None:
    """`stall_at`: the fault's delay (or hang) happens here instead of before the request."""
    if fault.get("stall_at") == point:
        apply_delay(fault)


def cmd_new(ctx: EmuContext, opts: dict[str, Any]) -> int:
    name = opts.get("session") or random_hex(6)
    fault = take_fault(ctx.emu_home, "new", name)
    echo(f"[colab] Creating session '{name}'...")
    variant, accelerator = hardware_request(opts.get("gpu"), opts.get("tpu"))
    machine_shape = "STANDARD"
    if opts.get("high_mem"):
        if accelerator in SINGLE_SHAPE:
            echo(
                "[colab] --high-mem ignored: this accelerator only offers one machine shape.",
                err=True,
            )
        else:
            machine_shape = "HIGH_RAM"
    authenticate(ctx, name)
    if not fault.get("stall_at"):
        apply_delay(fault)
    query = f"variant={variant}"
    if accelerator != "NONE":
        query += f"&accelerator={accelerator}"
    if machine_shape == "HIGH_RAM":
        query += "&shape=hm"
    status = fault.get("http")
    if status in (412, 400) and (status == 412 or accelerator != "NONE"):
        raise _refused(status, accelerator)
    if status is not None:
        url = f"{COLAB_BASE}/tun/m/assign?nbh={random_uuid()}&{query}&authuser=0"
        raise http_error("POST" if status == 400 else "GET", url, status)
    # `serve_gpu`: the server gives a GPU request another GPU than asked (Colab may).
    served = fault.get("serve_gpu") if variant == "GPU" else None
    try:
        assignment = request_assignment(
            ctx, name, query, (variant, accelerator, machine_shape), served
        )
    except Refused as refusal:
        if refusal.status == 400 and accelerator == "NONE":
            url = f"{COLAB_BASE}/tun/m/assign?{query}&authuser=0"
            raise http_error("POST", url, 400) from None
        raise _refused(refusal.status, accelerator) from None
    _die("assign", fault)
    _stall("assign", fault)
    store_for(ctx).add(new_record(name, assignment, accelerator))
    record_history(ctx, name, "session_created", endpoint=assignment["endpoint"])
    _die("state", fault)
    _stall("state", fault)
    echo("[colab] Session READY.")
    return 0


def status_line(record: dict[str, Any]) -> str:
    running = record.get("running")
    return (
        describe(record["name"], record)
        + f" | Status: {f'BUSY ({running})' if running else 'IDLE'}"
    )


def last_execution_line(record: dict[str, Any]) -> str | None:
    last = record.get("last_execution")
    if not isinstance(last, list) or len(last) != 3:
        return None
    source, cell, when = last
    cell_part = f" | Cell: {cell}" if cell is not None else ""
    return f"  Last Execution: {source}{cell_part} at {when}"


def cmd_status(ctx: EmuContext, opts: dict[str, Any]) -> int:
    name = opts.get("session")
    fault = take_fault(ctx.emu_home, "status", name)
    apply_delay(fault)
    store = store_for(ctx)
    try:
        sync_sessions(ctx, fault, name)
    except AuthRefreshExit:
        if store.load():
            raise
    local = store.load()
    if name:
        if name not in local:
            raise not_found(name, 0)
        records = [local[name]]
    else:
        records = list(local.values())
    if not records:
        echo("[colab] No active sessions.")
    for record in records:
        echo(status_line(record))
        last = last_execution_line(record)
        if last:
            echo(last)
    return 0


def cmd_sessions(ctx: EmuContext, opts: dict[str, Any]) -> int:
    fault = take_fault(ctx.emu_home, "sessions", None)
    apply_delay(fault)
    store = store_for(ctx)
    try:
        assignments = sync_sessions(ctx, fault, None)
    except AuthRefreshExit:
        if store.load():
            raise
        assignments = []
    by_endpoint: dict[str, str] = {}
    for name, record in store.load().items():
        by_endpoint.setdefault(record.get("endpoint", ""), name)
    if not assignments:
        echo("[colab] No active sessions found on server.")
    for assignment in assignments:
        echo(describe(by_endpoint.get(assignment["endpoint"], "?"), assignment))
    return 0


def cmd_stop(ctx: EmuContext, opts: dict[str, Any]) -> int:
    name = resolve_session(ctx, opts.get("session"))
    fault = take_fault(ctx.emu_home, "stop", name)
    record = get_session(ctx, name, ignore_missing=True)
    echo(f"[colab] Stopping session '{name}'...")
    authenticate(ctx, name)
    apply_delay(fault)
    url = f"{COLAB_BASE}/tun/m/unassign/{record['endpoint']}"
    raise_http_fault(fault, "GET", url)
    # The real backend's answer for an endpoint that is already gone is not known; be idempotent.
    backend_for(ctx).unassign(record["endpoint"])
    log_debug(ctx, f"POST {url} -> 200")
    store_for(ctx).remove(name)
    record_history(ctx, name, "session_terminated", reason="user_requested")
    echo("[colab] Session terminated.")
    return 0


def cmd_restart_kernel(ctx: EmuContext, opts: dict[str, Any]) -> int:
    """`restart-kernel`: what commands/session.py's restart_kernel does, through the emulator.

    resolve_session + get_session (unknown name: `not found`, exit 1); connect to the kernel
    (starting one, and writing the record, if it has no kernel_id); POST .../restart; nothing
    printed. `running` is left alone. A VM that is gone answers the kernel request with 404,
    which jupyter-kernel-client raises (requests' HTTPError: traceback, exit 1, record kept).
    """
    name = resolve_session(ctx, opts.get("session"))
    record = get_session(ctx, name)
    fault = take_fault(ctx.emu_home, "restart-kernel", name)
    apply_delay(fault)
    url = f"{record['url']}/api/kernels"
    if backend_for(ctx).get(record["endpoint"]) is None:
        log_debug(ctx, f"POST {url} -> 404")
        raise RequestsHTTPError(f"404 Client Error: Not Found for url: {url}")
    if proxy_rejects(backend_for(ctx), record, ctx.environ):
        log_debug(ctx, f"POST {url} -> 401")
        raise RequestsHTTPError(f"401 Client Error: Unauthorized for url: {url}")
    if not record.get("kernel_id"):
        record["kernel_id"] = random_uuid()
        record["session_id"] = random_uuid()
        store_for(ctx).add(record)
    restart_kernel(ctx.emu_home, record["endpoint"])
    log_debug(ctx, f"POST {url}/{record['kernel_id']}/restart -> 200")
    return 0


def cmd_usage(ctx: EmuContext, opts: dict[str, Any]) -> int:
    fault = take_fault(ctx.emu_home, "usage", None)
    try:
        authenticate(ctx, None)
        apply_delay(fault)
        raise_http_fault(fault, "GET", f"{COLAB_BASE}/tun/m/ccu-info")
        info = backend_for(ctx).ccu_info()
    except Exception as exc:
        echo(f"[colab] Warning: failed to fetch compute-unit info: {exc}", err=True)
        raise CliExit(1) from exc
    echo(f"Current balance: {info.balance:.2f} compute units")
    echo(f"Usage rate: {info.rate_per_hour:.2f}/hr")
    echo(f"Active assignments: {info.assignments}")
    return 0


def cmd_version(ctx: EmuContext, opts: dict[str, Any]) -> int:
    echo(f"Version: {release_from(ctx.environ).version}")
    return 0
