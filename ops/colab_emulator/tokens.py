"""Runtime-proxy tokens: their lifetime, their renewal by the server, the proxy's check.

What the spec leaves open (§3, §8: the real TTL, and whether an expired token meets 401/404 on
the proxy), the emulator decides this way, so that colabq can be tried against it:
- An assignment's proxy token expires `COLAB_EMU_TOKEN_LIFETIME_S` (default 3600, what issue
  reports say) after it was issued; the first one when the VM was assigned.
- Listing the assignments (`sync_sessions`: status, sessions; `get_session`'s refresh) issues a
  fresh token, with a full lifetime, for each assignment whose current one is expired or within
  the refresh margin of its expiry; earlier tokens stay valid until their own expiry. The record
  then gets the token and its expiry (the real `tokenExpiresInSeconds`).
- The refresh margin is the CLI's `TOKEN_REFRESH_MARGIN` (300 s), which get_session uses too;
  `COLAB_EMU_TOKEN_REFRESH_MARGIN_S` scales it down with the lifetime, for tests.
- The runtime proxy (exec's connection and its `/content` prelude, upload, download, ls, rm,
  restart-kernel) answers **401** to a token that expired or was never issued: exec then takes the
  CLI's `appears to be lost (404/401). Cleaning up.` path and prunes the record of a live VM.
- A connection outlives its token by nothing: when the token an exec connected with expires,
  the proxy closes its websocket (`cmd_exec`). What the real client (jupyter-kernel-client 0.9.0,
  `execute_interactive`) then does: the close only clears `connection_ready`; the loop, asleep
  on `_message_received.wait(timeout)`, is not woken, so it receives nothing more and waits for
  its `--timeout` deadline, then raises `RuntimeError: Connection was lost.` (exit 1). The cell
  goes on in the kernel. The websocket thread ended with the close, so there is no 10 s exit
  delay. (Had output been arriving at the very moment of the close, the loop would be awake
  and raise at once: a race of milliseconds the emulator does not reproduce.)

Server state: `token` (the current one), `token_expires_epoch`, and `previous_tokens`
(`{token: expires_epoch}`, the earlier ones still valid) in each assignment of `server.json`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from .backend import TOKEN_LIFETIME_S, Backend
from .ids import random_token
from .jsonfile import locked, write_json

LIFETIME_VAR = "COLAB_EMU_TOKEN_LIFETIME_S"
MARGIN_VAR = "COLAB_EMU_TOKEN_REFRESH_MARGIN_S"
REFRESH_MARGIN_S = 300.0  # the real CLI's TOKEN_REFRESH_MARGIN


def _positive(environ: Mapping[str, str], var: str, default: float) -> float:
    try:
        value = float(environ.get(var, default))
    except ValueError:
        return default
    return value if value > 0 else default


def lifetime_s(environ: Mapping[str, str]) -> float:
    return _positive(environ, LIFETIME_VAR, float(TOKEN_LIFETIME_S))


def margin_s(environ: Mapping[str, str]) -> float:
    return _positive(environ, MARGIN_VAR, REFRESH_MARGIN_S)


def expires_epoch(assignment: Mapping[str, Any], lifetime: float) -> float:
    """When the assignment's current token expires (the first: its assignment plus a lifetime)."""
    raw = assignment.get("token_expires_epoch")
    if isinstance(raw, int | float):
        return float(raw)
    return float(assignment.get("assigned_epoch") or assignment.get("billed_until") or 0) + lifetime


def expiry_iso(assignment: Mapping[str, Any], environ: Mapping[str, str]) -> str:
    """The record's `token_expires_at` for the assignment's current token."""
    return datetime.fromtimestamp(expires_epoch(assignment, lifetime_s(environ)), UTC).isoformat()


def list_renewed(
    backend: Backend, environ: Mapping[str, str], now: float | None = None
) -> list[dict[str, Any]]:
    """The assignments, as `GET /tun/m/assignments` answers: a token due for renewal is replaced
    (the old one kept valid until it expires) and each carries `token_expires_epoch`."""
    now = time.time() if now is None else now
    life, margin = lifetime_s(environ), margin_s(environ)
    found = backend.list_assignments()
    if all(expires_epoch(a, life) - now > margin for a in found):
        return [{**a, "token_expires_epoch": expires_epoch(a, life)} for a in found]
    with locked(backend.lock_path):
        state = backend._load()  # the server's own state, under its lock
        for a in state["assignments"].values():
            expires = expires_epoch(a, life)
            if expires - now > margin:
                a["token_expires_epoch"] = expires
                continue
            kept = {t: e for t, e in (a.get("previous_tokens") or {}).items() if e > now}
            if expires > now:
                kept[a["token"]] = expires
            a["previous_tokens"] = kept
            a["token"] = random_token(24)
            a["token_expires_epoch"] = now + life
        write_json(backend.state_path, state)
    return backend.list_assignments()


def token_expiry(
    backend: Backend, record: Mapping[str, Any], environ: Mapping[str, str]
) -> float | None:
    """When the record's token expires (epoch), as the server issued it; None for a token it
    never issued for this VM, or a VM that is gone."""
    assignment = backend.get(str(record.get("endpoint", "")))
    if assignment is None:
        return None
    valid = dict(assignment.get("previous_tokens") or {})
    valid[assignment["token"]] = expires_epoch(assignment, lifetime_s(environ))
    expires = valid.get(str(record.get("token", "")))
    return None if expires is None else float(expires)


def proxy_rejects(backend: Backend, record: Mapping[str, Any], environ: Mapping[str, str]) -> bool:
    """True when the runtime proxy would answer 401 to the record's token (expired, or never
    issued for this VM). False for a VM that is gone: that is the proxy's 404, not this."""
    if backend.get(str(record.get("endpoint", ""))) is None:
        return False
    expires = token_expiry(backend, record, environ)
    return expires is None or time.time() >= expires
