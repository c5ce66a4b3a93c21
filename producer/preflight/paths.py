"""The `paths` check: every path the run needs exists now and can be read.

Owns checking local paths (inputs exist and are readable, an output folder's parent exists)
and sending every remote URI through the injected `RemoteChecker` at once. Which config values
are paths is `path_refs.py`'s. A remote URI that cannot be checked makes the check SKIP, never
PASS; a missing or unreadable path makes it FAIL.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from producer.preflight.configs import LoadedConfig
from producer.preflight.path_refs import PathRef, PathRole, find_path_refs, is_uri
from producer.preflight.remote import RemoteChecker, RemoteState, check_all
from producer.preflight.report import CheckName, Finding, Verdict, worst_verdict

_REMOTE_VERDICT = {
    RemoteState.EXISTS: Verdict.PASS,
    RemoteState.MISSING: Verdict.FAIL,
    RemoteState.UNCHECKABLE: Verdict.SKIP,
}


def _nearest_existing(path: Path) -> str:
    for ancestor in path.parents:
        if ancestor.exists():
            return f" (nearest existing folder: {ancestor})"
    return ""


def _check_output(path: Path) -> tuple[Verdict, str]:
    parent = path.parent
    if not parent.exists():
        return Verdict.FAIL, f"parent folder {parent} does not exist{_nearest_existing(parent)}"
    if not parent.is_dir():
        return Verdict.FAIL, f"parent {parent} is not a folder"
    if path.exists() and not path.is_dir():
        return Verdict.FAIL, "exists and is not a folder"
    if not os.access(parent, os.W_OK):
        return Verdict.FAIL, f"parent folder {parent} is not writable"
    return Verdict.PASS, "exists already (reused)" if path.exists() else "parent folder exists"


def _check_input(path: Path, expect_file: bool | None) -> tuple[Verdict, str]:
    try:
        link = os.lstat(path)
    except FileNotFoundError:
        return Verdict.FAIL, f"does not exist{_nearest_existing(path)}"
    except OSError as exc:
        return Verdict.FAIL, f"cannot be reached: {exc.strerror}"
    try:
        st = os.stat(path)
    except OSError as exc:
        if stat.S_ISLNK(link.st_mode):
            return Verdict.FAIL, f"is a broken symlink (to {os.readlink(path)})"
        return Verdict.FAIL, f"cannot be reached: {exc.strerror}"
    if stat.S_ISDIR(st.st_mode):
        if expect_file:
            return Verdict.FAIL, "is a folder, but a file is expected here"
        try:
            with os.scandir(path) as entries:
                next(entries, None)
        except OSError as exc:
            return Verdict.FAIL, f"folder is not readable: {exc.strerror}"
        return Verdict.PASS, "folder, readable"
    if not stat.S_ISREG(st.st_mode):
        return Verdict.FAIL, "is not a regular file or folder (a FIFO, socket or device)"
    if expect_file is False:
        return Verdict.FAIL, "is a file, but a folder is expected here"
    try:
        # O_NONBLOCK: opening must never wait (the mode was checked, but it may change under us).
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
    except OSError as exc:
        reason = "permission denied" if exc.errno in (errno.EACCES, errno.EPERM) else exc.strerror
        return Verdict.FAIL, f"file is not readable: {reason}"
    return Verdict.PASS, f"file, {st.st_size} bytes, readable"


def check_local_path(path: Path, role: PathRole, expect_file: bool | None) -> tuple[Verdict, str]:
    if role is PathRole.OUTPUT:
        return _check_output(path)
    return _check_input(path, True if role is PathRole.CONFIG else expect_file)


def _local(value: str, repo: Path, env: Mapping[str, str]) -> Path:
    if value == "~" or value.startswith(("~/", "~\\")):
        value = env.get("HOME", "~") + value[1:]
    path = Path(value)
    return path if path.is_absolute() else repo / path


def check_paths(
    config: LoadedConfig | None,
    *,
    config_path: Path,
    repo: Path,
    env: Mapping[str, str],
    remote_checker: RemoteChecker,
    hub_inputs: Mapping[str, str] | None = None,
) -> Finding:
    """Check the config file, every path it names, and the declared Hub inputs."""
    refs = [PathRef("--config", str(config_path), PathRole.CONFIG, True)]
    lines: list[tuple[Verdict, str]] = []
    notes: tuple[str, ...] = ()
    if config is not None:
        found, notes = find_path_refs(config.data, env)
        refs += found
    else:
        lines.append((Verdict.SKIP, "paths inside the config: not read, the config does not parse"))
    for name, uri in (hub_inputs or {}).items():
        refs.append(PathRef(f"--hub-input {name}", uri, PathRole.INPUT))
    remote: dict[str, PathRef] = {}
    for ref in refs:
        if ref.unresolved:
            lines.append((Verdict.SKIP, f"{ref.key} = {ref.value!r}: {ref.unresolved}"))
        elif is_uri(ref.value):
            remote[ref.value] = ref
        elif ref.key.startswith("--hub-input"):
            lines.append(
                (
                    Verdict.FAIL,
                    f"{ref.key} = {ref.value!r}: not a URI (use hf://, "
                    "gs:// or https://; local paths are not uploaded)",
                )
            )
        else:
            local = _local(ref.value, repo, env)
            if ref.hub_uri and not os.path.lexists(local):
                remote[ref.hub_uri] = ref
                continue
            verdict, detail = check_local_path(local, ref.role, ref.expect_file)
            lines.append((verdict, f"{ref.key} = {ref.value} ({ref.role}): {detail}"))
    statuses = check_all(remote, remote_checker)
    for uri, status in statuses.items():
        ref = remote[uri]
        shown = uri if uri == ref.value else f"{ref.value} → {uri}"
        lines.append((_REMOTE_VERDICT[status.state], f"{ref.key} = {shown}: {status.detail}"))
    return _finding(lines, notes)


def _finding(lines: list[tuple[Verdict, str]], notes: tuple[str, ...]) -> Finding:
    verdict = worst_verdict(v for v, _ in lines)
    count = {v: sum(1 for w, _ in lines if w is v) for v in Verdict}
    saw = (
        f"{len(lines)} path(s): {count[Verdict.PASS]} ok, {count[Verdict.FAIL]} failing, "
        f"{count[Verdict.SKIP]} not checkable"
    )
    details = tuple(f"[{v}] {text}" for v, text in lines) + notes

    def keys(wanted: Verdict) -> str:
        return ", ".join(t.split(" = ", 1)[0].split(": ", 1)[0] for v, t in lines if v is wanted)

    if verdict is Verdict.FAIL:
        action = f"fix or create before submitting: {keys(Verdict.FAIL)}"
    elif verdict is Verdict.SKIP:
        action = f"verify by hand (could not be checked here): {keys(Verdict.SKIP)}"
    else:
        action = "none"
    return Finding(CheckName.PATHS, verdict, saw, action, details)
