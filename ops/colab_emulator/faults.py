"""Fault injection: the schema of `$COLAB_EMU_HOME/faults.json` and the API to change it.

The file is `{"faults": [{"command": "new", "http": 412, "times": 1}, ...]}`. Every emulator
process reads it when a command starts, so a test may change faults while a job runs. At most one
fault exists per (command, match_session); a session-specific fault wins over a generic one.
`times: N` makes a fault remove itself after N applications (default: unlimited).

Stdlib only: tests import it as `from colab_emulator.faults import set_fault, clear_faults`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .jsonfile import locked, read_json, write_json

FILE_NAME = "faults.json"
COMMON_FIELDS = ("delay_s", "hang", "times", "match_session", "match_home")
HTTP_COMMANDS = ("status", "sessions", "usage", "stop")
FILE_COMMANDS = ("upload", "download", "ls", "rm")
COMMAND_FIELDS: dict[str, tuple[str, ...]] = {
    "new": ("http", "kill_after", "serve_gpu", "stall_at"),
    # One application per assignment POST of `new` (0.7.5 may send several): see assign.py.
    "assign": ("http", "assigned"),
    **{name: ("http",) for name in HTTP_COMMANDS},
    **{name: ("fail",) for name in FILE_COMMANDS},
    "exec": ("lost", "on_lost", "linger_s"),
    "restart-kernel": (),
    "auth": ("fail", "mode"),
}
KILL_POINTS = ("assign", "state")  # also where `stall_at` puts a `new` fault's delay
AUTH_MODES = ("missing", "refresh", "http")
ON_LOST = ("error", "timeout")
SERVED_GPUS = ("T4", "L4", "G4", "A100", "H100")


class FaultError(ValueError):
    """A fault that does not fit the schema."""


def _paths(home: Path | str) -> tuple[Path, Path]:
    base = Path(home)
    return base / FILE_NAME, base / (FILE_NAME + ".lock")


def _check_http(value: Any, command: str) -> None:
    if value == "network" or (value == "timeout" and command == "assign"):
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 400 <= value <= 599:
        extra = ", 'network' or 'timeout'" if command == "assign" else " or 'network'"
        raise FaultError(f"http must be an HTTP error status (400-599){extra}, not {value!r}")


def validate(command: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The fault as stored; raises FaultError naming the first field that does not fit."""
    if command not in COMMAND_FIELDS:
        raise FaultError(f"unknown command {command!r}; one of {', '.join(COMMAND_FIELDS)}")
    allowed = COMMON_FIELDS + COMMAND_FIELDS[command]
    for key, value in fields.items():
        if key not in allowed:
            raise FaultError(f"field {key!r} does not apply to {command!r}; allowed: {allowed}")
        if key in ("delay_s", "linger_s") and (
            isinstance(value, bool) or not isinstance(value, int | float) or value < 0
        ):
            raise FaultError(f"{key} must be a number >= 0")
        if key in ("hang", "lost", "assigned") and not isinstance(value, bool):
            raise FaultError(f"{key} must be true or false")
        if key == "times" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise FaultError("times must be an integer >= 1")
        if key == "match_session" and not isinstance(value, str):
            raise FaultError("match_session must be a session name")
        if key == "match_home" and not (isinstance(value, str) and value.startswith("/")):
            raise FaultError("match_home must be an absolute path (a machine's HOME)")
        if key == "http":
            _check_http(value, command)
        if key in ("kill_after", "stall_at") and value not in KILL_POINTS:
            raise FaultError(f"{key} must be one of {KILL_POINTS}")
        if key == "fail" and command != "auth" and not isinstance(value, str):
            raise FaultError("fail must be the failure message")
        if key == "fail" and command == "auth" and not isinstance(value, bool | str):
            raise FaultError("auth fail must be true or a message")
        if key == "mode" and value not in AUTH_MODES:
            raise FaultError(f"mode must be one of {AUTH_MODES}")
        if key == "on_lost" and value not in ON_LOST:
            raise FaultError(f"on_lost must be one of {ON_LOST}")
        if key == "serve_gpu" and (not isinstance(value, str) or value.upper() not in SERVED_GPUS):
            raise FaultError(f"serve_gpu must be one of {SERVED_GPUS}")
    if "serve_gpu" in fields:
        fields = {**fields, "serve_gpu": fields["serve_gpu"].upper()}
    return {"command": command, **fields}


def list_faults(home: Path | str) -> list[dict[str, Any]]:
    path, _ = _paths(home)
    data = read_json(path, {})
    faults = data.get("faults", []) if isinstance(data, dict) else []
    return [f for f in faults if isinstance(f, dict)]


def set_fault(home: Path | str, command: str, **fields: Any) -> dict[str, Any]:
    """Install (or replace) the fault for `command` and `fields.get('match_session')`."""
    fault = validate(command, fields)
    path, lock = _paths(home)
    with locked(lock):
        here = (command, fault.get("match_session"), fault.get("match_home"))
        kept = [
            f
            for f in list_faults(home)
            if (f.get("command"), f.get("match_session"), f.get("match_home")) != here
        ]
        write_json(path, {"faults": [*kept, fault]})
    return fault


def clear_faults(home: Path | str, command: str | None = None) -> None:
    """Remove every fault, or only those of `command`."""
    path, lock = _paths(home)
    with locked(lock):
        kept = (
            [] if command is None else [f for f in list_faults(home) if f.get("command") != command]
        )
        write_json(path, {"faults": kept})


def take_fault(home: Path | str, command: str, session: str | None) -> dict[str, Any]:
    """The fault that applies to this invocation (empty if none), counting one application."""
    path, lock = _paths(home)
    if not path.exists():
        return {}
    with locked(lock):
        faults = list_faults(home)
        candidates = [
            i
            for i, f in enumerate(faults)
            if f.get("command") == command
            and f.get("match_session") in (None, session)
            and f.get("match_home") in (None, os.environ.get("HOME"))
        ]
        if not candidates:
            return {}
        index = max(candidates, key=lambda i: faults[i].get("match_session") is not None)
        fault = dict(faults[index])
        if "times" in fault:
            if fault["times"] <= 1:
                faults.pop(index)
            else:
                faults[index] = {**fault, "times": fault["times"] - 1}
            write_json(path, {"faults": faults})
    return fault


def apply_delay(fault: dict[str, Any], sleep: Callable[[float], None] = time.sleep) -> None:
    """`delay_s` sleeps that long; `hang` sleeps until the process is killed."""
    if fault.get("delay_s"):
        sleep(float(fault["delay_s"]))
    while fault.get("hang"):
        sleep(3600)
