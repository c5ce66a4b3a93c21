"""The Contents-API commands: upload, download, ls, rm, against the VM's folder.

Remote paths are relative to the VM's `/` (a leading `/` is stripped, as the real client does).
A record whose VM is gone behaves like a runtime proxy answering 404.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from .context import EmuContext
from .errors import CliExit
from .faults import apply_delay, take_fault
from .output import echo
from .session_ops import backend_for, get_session, resolve_session
from .store import Record, record_history
from .tokens import proxy_rejects
from .vm import vm_paths


def _session(
    ctx: EmuContext, opts: dict[str, Any], command: str
) -> tuple[str, Record, dict[str, Any]]:
    name = resolve_session(ctx, opts.get("session"))
    record = get_session(ctx, name)
    return name, record, take_fault(ctx.emu_home, command, name)


def _vm_root(ctx: EmuContext, record: Record, failed: str) -> Path | None:
    """The VM's `/` folder, or None when the VM no longer exists. A token the proxy refuses
    (`tokens.py`) fails the command with its 401 (`failed`: the command's failure prefix)."""
    backend = backend_for(ctx)
    if backend.get(record["endpoint"]) is None:
        return None
    if proxy_rejects(backend, record, ctx.environ):
        url = f"{record['url']}/api/contents"
        raise _fail(failed, f"401 Client Error: Unauthorized for url: {url}")
    root = vm_paths(ctx.emu_home, record["endpoint"]).root
    return root if root.is_dir() else None


def _remote(root: Path, remote: str) -> Path | None:
    """The local path of `remote` inside the VM, or None if it would leave the sandbox."""
    target = Path(os.path.normpath(root / remote.lstrip("/")))
    return target if target == root or root in target.parents else None


def _fail(prefix: str, message: str) -> CliExit:
    echo(f"[colab] {prefix}{message}")
    return CliExit(1)


def cmd_upload(ctx: EmuContext, opts: dict[str, Any]) -> int:
    local, remote = opts["local"], opts["remote"]
    name, record, fault = _session(ctx, opts, "upload")
    if not os.path.isfile(local):
        raise _fail("", f"Local file '{local}' not found.")
    data = Path(local).read_bytes()
    apply_delay(fault)
    if fault.get("fail"):
        raise _fail("Upload failed: ", fault["fail"])
    api_url = f"{record['url']}/api/contents/{remote.lstrip('/')}"
    root = _vm_root(ctx, record, "Upload failed: ")
    if root is None:
        raise _fail("Upload failed: ", f"404 Client Error: Not Found for url: {api_url}")
    target = _remote(root, remote)
    if target is None or target.is_dir() or not target.parent.is_dir():
        code = (
            "400 Client Error: Bad Request"
            if target is None or target.is_dir()
            else "500 Server Error: Internal Server Error"
        )
        raise _fail("Upload failed: ", f"{code} for url: {api_url}")
    target.write_bytes(data)
    target.chmod(0o644)
    record_history(ctx, name, "file_operation", operation="upload", local=local, remote=remote)
    echo(f"[colab] Uploaded '{local}' to '{remote}'")
    return 0


def cmd_download(ctx: EmuContext, opts: dict[str, Any]) -> int:
    remote, local = opts["remote"], opts["local"]
    name, record, fault = _session(ctx, opts, "download")
    apply_delay(fault)
    if fault.get("fail"):
        raise _fail("Download failed: ", fault["fail"])
    root = _vm_root(ctx, record, "Download failed: ")
    target = _remote(root, remote) if root else None
    if target is None or not target.exists():
        raise _fail("Download failed: ", f"File or directory not found: {remote}")
    if target.is_dir():
        raise _fail("Download failed: ", f"Cannot download a directory: {remote}")
    try:
        Path(local).write_bytes(target.read_bytes())
    except OSError as exc:
        raise _fail("Download failed: ", str(exc)) from exc
    record_history(ctx, name, "file_operation", operation="download", local=local, remote=remote)
    echo(f"[colab] Downloaded '{remote}' to '{local}'")
    return 0


def cmd_ls(ctx: EmuContext, opts: dict[str, Any]) -> int:
    path = opts.get("path") or "content"
    _, record, fault = _session(ctx, opts, "ls")
    apply_delay(fault)
    if fault.get("fail"):
        raise _fail("Error: ", fault["fail"])
    root = _vm_root(ctx, record, "Error: ")
    target = _remote(root, path) if root else None
    if target is None or not target.exists():
        raise _fail("Error: ", f"File or directory not found: {path}")
    if not target.is_dir():
        echo(target.name)
        return 0
    entries = [e for e in target.iterdir() if not e.name.startswith(".")]
    for entry in sorted((e for e in entries if e.is_dir()), key=lambda e: e.name):
        echo(entry.name + "/")
    for entry in sorted((e for e in entries if not e.is_dir()), key=lambda e: e.name):
        echo(entry.name)
    return 0


def cmd_rm(ctx: EmuContext, opts: dict[str, Any]) -> int:
    path = opts["path"]
    name, record, fault = _session(ctx, opts, "rm")
    apply_delay(fault)
    if fault.get("fail"):
        raise _fail("Error: ", fault["fail"])
    root = _vm_root(ctx, record, "Error: ")
    target = _remote(root, path) if root else None
    if target is None or target == root or not (target.exists() or target.is_symlink()):
        raise _fail("Error: ", f"File or directory not found: {path}")
    if target.is_dir() and not target.is_symlink():
        if any(not e.name.startswith(".") for e in target.iterdir()):
            raise _fail("Error: ", f"Directory {path} not empty")
        shutil.rmtree(target)
    else:
        target.unlink()
    record_history(ctx, name, "file_operation", operation="rm", remote=path)
    echo(f"[colab] Deleted {path}")
    return 0
