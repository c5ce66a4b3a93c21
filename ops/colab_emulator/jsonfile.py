"""File locks (fcntl) and atomic JSON files: how every piece of emulator state is read and written.

Readers take a shared lock, writers an exclusive one on a sibling `.lock` file; a write goes to a
temporary file that is fsynced and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def locked(lock_path: Path, *, shared: bool = False) -> Iterator[None]:
    """Hold an flock on `lock_path` (created if needed) for the duration of the block.

    A reader whose folder does not exist has nothing to read and takes no lock, so a detached
    process polling a deleted emulator home does not create it again.
    """
    if shared and not lock_path.parent.is_dir():
        yield
        return
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def read_json(path: Path, default: Any) -> Any:
    """The parsed file, or `default` when it is missing, unreadable or corrupt (as the CLI does)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return default


def write_json(path: Path, data: Any, *, indent: int | None = 2, mode: int = 0o600) -> None:
    """Replace `path` atomically with `data` serialised as JSON (a file of `mode`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        if mode != 0o600:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=indent)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
