"""The local CLI state the real program keeps: sessions.json, history, colab.log, settings.json.

sessions.json is `{name: record}` (indent=2) guarded by `sessions.json.lock`; a corrupt file reads
as empty. Every write is a read-modify-write of one whole record under the exclusive lock.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from .backend import TOKEN_LIFETIME_S
from .context import EmuContext
from .jsonfile import locked, read_json, write_json
from .tokens import expiry_iso

Record = dict[str, Any]


class SessionStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock_path = path.with_name(path.name + ".lock")

    def _read(self) -> dict[str, Record]:
        """The records, completed with SessionState's defaults; {} if any record is invalid.

        The real store parses every record into a pydantic model inside one `try` and returns
        `{}` on any error, so a single record without `token` (say) empties the whole file.
        """
        data = read_json(self.path, {})
        if not isinstance(data, dict):
            return {}
        records = {}
        for key, value in data.items():
            record = session_state(value)
            if record is None:
                return {}
            records[key] = record
        return records

    def load(self) -> dict[str, Record]:
        with locked(self.lock_path, shared=True):
            return self._read()

    def get(self, name: str) -> Record | None:
        return self.load().get(name)

    def add(self, record: Record) -> None:
        with locked(self.lock_path):
            data = self._read()
            data[record["name"]] = record
            write_json(self.path, data)

    def remove(self, name: str) -> bool:
        with locked(self.lock_path):
            data = self._read()
            if data.pop(name, None) is None:
                return False
            write_json(self.path, data)
            return True


REQUIRED_FIELDS = ("name", "token", "url", "endpoint")
OPTIONAL_FIELDS: dict[str, Any] = {
    "token_expires_at": None,
    "variant": "DEFAULT",
    "accelerator": "NONE",
    "machine_shape": "STANDARD",
    "kernel_id": None,
    "session_id": None,
    "last_execution": None,
    "running": None,
}


def session_state(value: Any) -> Record | None:
    """The record as the real `SessionState` model reads it (defaults filled), or None."""
    if not isinstance(value, dict):
        return None
    if any(not isinstance(value.get(field), str) for field in REQUIRED_FIELDS):
        return None
    record = {field: value[field] for field in REQUIRED_FIELDS}
    for field, default in OPTIONAL_FIELDS.items():
        record[field] = value.get(field, default)
    expires = record["token_expires_at"]
    if expires is not None:
        try:
            datetime.fromisoformat(str(expires).replace("Z", "+00:00"))
        except ValueError:
            return None
    for field in ("variant", "accelerator", "machine_shape"):
        if not isinstance(record[field], str):
            return None
    last = record["last_execution"]
    if last is not None and (not isinstance(last, list | tuple) or len(last) != 3):
        return None
    return record


def token_expiry_iso(now: float | None = None) -> str:
    moment = datetime.fromtimestamp(now if now is not None else time.time(), UTC)
    return (moment + timedelta(seconds=TOKEN_LIFETIME_S)).isoformat()


def new_record(name: str, assignment: Mapping[str, Any], accelerator: str | None = None) -> Record:
    """The record `colab new` writes: proxy info and endpoint from the assign response, but
    variant and accelerator as *requested* (the real `new` stores `accelerator.value`, the
    flag's mapping, not the response's), so a substituted GPU shows only server-side."""
    return {
        "name": name,
        "token": assignment["token"],
        "url": assignment["url"],
        "endpoint": assignment["endpoint"],
        # What the server gave this token (tokens.py: COLAB_EMU_TOKEN_LIFETIME_S).
        "token_expires_at": expiry_iso(assignment, os.environ),
        "variant": assignment["variant"],
        "accelerator": accelerator or assignment["accelerator"],
        "machine_shape": assignment["machine_shape"],
        "kernel_id": None,
        "session_id": None,
        "last_execution": None,
        "running": None,
    }


def local_time_str(now: float | None = None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))


def record_history(ctx: EmuContext, name: str, event_type: str, **fields: Any) -> None:
    """Append one event to `history/<name>.jsonl` (never pruned, values in clear text)."""
    ctx.history_dir.mkdir(parents=True, exist_ok=True)
    event = {"timestamp": datetime.now(UTC).isoformat(), "event_type": event_type, **fields}
    with open(ctx.history_dir / f"{name}.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(event) + "\n")


def _append_log(ctx: EmuContext, line: str) -> None:
    ctx.cli_dir.mkdir(parents=True, exist_ok=True)
    with open(ctx.log_path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
    if ctx.log_to_stderr:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def log_debug(ctx: EmuContext, message: str) -> None:
    """Append to `colab.log` (and stderr with `--logtostderr`), like the CLI's root logger."""
    stamp = datetime.now().isoformat(sep=" ", timespec="milliseconds")
    _append_log(ctx, f"{stamp} DEBUG colab_cli: {message}")


def log_record(ctx: EmuContext, logger: str, level: str, message: str) -> None:
    """One line in the real CLI's logging format (common.setup_logging:
    `%(asctime)s - %(name)s - %(levelname)s - %(message)s`), for the lines a caller may read,
    e.g. 0.7.5's retry warning."""
    now = datetime.now()
    stamp = now.strftime("%Y-%m-%d %H:%M:%S") + f",{now.microsecond // 1000:03d}"
    _append_log(ctx, f"{stamp} - {logger} - {level} - {message}")


def load_settings(ctx: EmuContext) -> dict[str, Any]:
    data = read_json(ctx.settings_path, {})
    return data if isinstance(data, dict) else {}


def save_settings(ctx: EmuContext, change: Callable[[dict[str, Any]], None]) -> None:
    with locked(ctx.settings_path.with_name("settings.json.lock")):
        data = load_settings(ctx)
        change(data)
        write_json(ctx.settings_path, data)
