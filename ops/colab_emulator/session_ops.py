"""The CLI's session plumbing: authentication, `sync_sessions`, `resolve_session`, `get_session`.

These are the steps the real commands share (spec §2 and §3), including their quirks: sync writes
back a copy read before the network call, and prunes records whose endpoint the server dropped.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from .backend import Backend
from .context import EmuContext
from .errors import (
    COLAB_BASE,
    DEFAULT_CREDENTIALS_MESSAGE,
    AuthRefreshExit,
    CliExit,
    DefaultCredentialsError,
    http_error,
)
from .faults import apply_delay, take_fault
from .output import echo
from .store import Record, SessionStore, log_debug, record_history
from .tokens import expiry_iso, list_renewed, margin_s

ASSIGNMENTS_URL = f"{COLAB_BASE}/tun/m/assignments"
OAUTH_URL = (
    "https://accounts.google.com/o/oauth2/auth?response_type=code&client_id=emulated.apps."
    "googleusercontent.com&redirect_uri=urn%3Aietf%3Awg%3Aoauth%3A2.0%3Aoob&scope=openid+"
    "https%3A%2F%2Fwww.googleapis.com%2Fauth%2Fcolaboratory"
)
ADC_HINT = (
    "No valid default credentials found. To authenticate, run:\n"
    "  gcloud auth application-default login --scopes=openid,"
    "https://www.googleapis.com/auth/cloud-platform,"
    "https://www.googleapis.com/auth/userinfo.email,"
    "https://www.googleapis.com/auth/colaboratory"
)


def backend_for(ctx: EmuContext) -> Backend:
    return Backend(ctx.emu_home, ctx.time_scale)


def store_for(ctx: EmuContext) -> SessionStore:
    return SessionStore(ctx.config_path)


def authenticate(ctx: EmuContext, session: str | None) -> None:
    """Succeeds unless an `auth` fault says otherwise; then fails the way `--auth` would."""
    fault = take_fault(ctx.emu_home, "auth", session)
    apply_delay(fault)
    if not fault.get("fail"):
        return
    message = fault["fail"] if isinstance(fault["fail"], str) else None
    mode = fault.get("mode", "missing")
    if mode == "http":
        raise http_error("GET", ASSIGNMENTS_URL, 401)
    if ctx.auth == "adc" and mode == "refresh":
        echo(ADC_HINT, err=True)
        raise AuthRefreshExit(1)
    if ctx.auth == "adc":
        raise DefaultCredentialsError(message or DEFAULT_CREDENTIALS_MESSAGE)
    echo("To authorize colab-cli, visit this URL in any browser:", err=True)
    echo(OAUTH_URL, err=True)
    echo("After approving, Google will display an authorization code.", err=True)
    sys.stdout.write("Enter the authorization code: ")
    sys.stdout.flush()
    if not sys.stdin.readline():
        raise EOFError("EOF when reading a line")
    raise ValueError(message or "(invalid_grant) Bad Request")


def raise_http_fault(fault: dict[str, Any], method: str, url: str) -> None:
    if "http" in fault:
        raise http_error(method, url, fault["http"])


def prune(ctx: EmuContext, names: list[str], *, announce: bool) -> None:
    store = store_for(ctx)
    for name in names:
        store.remove(name)
        record_history(ctx, name, "session_terminated", reason="pruned")
    if names and announce:
        echo(f"[colab] Pruned {len(names)} stale local session(s).")


def sync_sessions(
    ctx: EmuContext, fault: dict[str, Any] | None = None, session: str | None = None
) -> list[dict[str, Any]]:
    """List server assignments, refresh live records from a stale copy, prune the others."""
    store = store_for(ctx)
    local = store.load()
    authenticate(ctx, session)
    raise_http_fault(fault or {}, "GET", ASSIGNMENTS_URL)
    assignments = list_renewed(backend_for(ctx), ctx.environ)
    log_debug(ctx, f"GET {ASSIGNMENTS_URL} -> 200 {len(assignments)} assignment(s)")
    live = {a["endpoint"]: a for a in assignments}
    stale = []
    for name, record in local.items():
        assignment = live.get(record.get("endpoint", ""))
        if assignment is None:
            stale.append(name)
            continue
        apply_proxy_info(record, assignment, ctx.environ)
        store.add(record)
    prune(ctx, stale, announce=True)
    return assignments


def not_found(name: str, code: int) -> CliExit:
    echo(f"[colab] Session '{name}' not found.")
    return CliExit(code)


def resolve_session(ctx: EmuContext, name: str | None) -> str:
    if name:
        return name
    store = store_for(ctx)
    no_sessions = "[colab] Error: No active sessions found. Create one with 'colab new'."
    if not store.load():
        echo(no_sessions)
        raise CliExit(1)
    sync_sessions(ctx)
    names = list(store.load())
    if not names:
        echo(no_sessions)
        raise CliExit(1)
    if len(names) > 1:
        echo(
            "[colab] Error: Multiple active sessions found. Specify one with -s: "
            + ", ".join(names)
        )
        raise CliExit(1)
    echo(f"[colab] Using unique session '{names[0]}'.")
    return names[0]


def _needs_refresh(record: Record, margin: float) -> bool:
    """No expiry, or one within TOKEN_REFRESH_MARGIN (5 min; `tokens.margin_s`): get_session
    asks the server."""
    raw = record.get("token_expires_at")
    if not raw:
        return True
    try:
        expires_at = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        return True
    if expires_at.tzinfo is None:
        expires_at = expires_at.replace(tzinfo=UTC)
    return expires_at.timestamp() - time.time() <= margin


def get_session(ctx: EmuContext, name: str, *, ignore_missing: bool = False) -> Record:
    """The record of `name`, refreshed like the real `get_session` (common.py).

    With no `token_expires_at`, or one within 5 minutes, it lists the assignments: if the
    endpoint is still assigned it copies the token, url and expiry into the record and writes it
    back (`_apply_proxy_info`, `store.add`); if not, it prunes the record (not found). That is
    what makes a record written by hand with only name and endpoint usable.
    """
    missing_code = 0 if ignore_missing else 1
    record = store_for(ctx).get(name)
    if record is None:
        raise not_found(name, missing_code)
    if _needs_refresh(record, margin_s(ctx.environ)):
        authenticate(ctx, name)
        assignments = list_renewed(backend_for(ctx), ctx.environ)
        log_debug(ctx, f"GET {ASSIGNMENTS_URL} -> 200 {len(assignments)} assignment(s)")
        live = {a["endpoint"]: a for a in assignments}
        assignment = live.get(record["endpoint"])
        if assignment is None:
            prune(ctx, [name], announce=False)
            raise not_found(name, missing_code)
        apply_proxy_info(record, assignment, ctx.environ)
        store_for(ctx).add(record)
    return record


def apply_proxy_info(
    record: Record, assignment: dict[str, Any], environ: Mapping[str, str]
) -> None:
    """The token, url and expiry the assignments list gave (`tokens.py`)."""
    record["token"] = assignment["token"]
    record["url"] = assignment["url"]
    record["token_expires_at"] = expiry_iso(assignment, environ)


def hardware(record: dict[str, Any]) -> str:
    return "CPU" if record["accelerator"] == "NONE" else str(record["accelerator"])


def shape(record: dict[str, Any]) -> str:
    return "High-RAM" if record["machine_shape"] == "HIGH_RAM" else "Standard"


def describe(label: str, record: dict[str, Any]) -> str:
    """`[name] endpoint | Hardware: T4 | Shape: Standard | Variant: GPU` (no Status field)."""
    return (
        f"[{label}] {record['endpoint']} | Hardware: {hardware(record)} | "
        f"Shape: {shape(record)} | Variant: {record['variant']}"
    )
