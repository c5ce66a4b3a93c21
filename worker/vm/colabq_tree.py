"""The files of one sync path, opened on the VM without following a single symbolic link, and
sent from what was opened: one commit to the Hub, or a copy to a rehearsal's local store.

The uploader runs as root and the job, an unprivileged user, owns its folder: it may put a link
anywhere in a sync path (to /etc/shadow, to the uploader's own /proc/self/environ, which holds
the token, to a folder outside), or swap a file for a link while an upload runs. So a path is
opened one component at a time from the job's folder (the root, which the job cannot replace),
each component with O_NOFOLLOW, and what was opened is judged by its descriptor (fstat), never by
its name again; the uploader then reads those descriptors and nothing else:

- a link, at any depth and whatever it names (inside the sync path or not), is left out, never
  followed, and named in the uploader's output (the Hub keeps no links; a file a link names
  inside the sync path is uploaded in its own place);
- a sync path that is itself a link, or lies under one, is left out whole;
- only regular files and folders are read: a FIFO, socket or device is left out (opened
  non-blocking, so a FIFO cannot hang the uploader);
- `.git` and `.cache/huggingface` folders are left out, as `huggingface_hub.upload_folder`
  leaves them.

Standard library only; colabq_sync.py (beside it on the VM) imports it.
"""

from __future__ import annotations

import errno
import os
import resource
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from huggingface_hub import HfApi

_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_IGNORED = ((".git",), (".cache", "huggingface"))
SHOWN = 20  # left-out paths named in one line


class TreeError(Exception):
    """The sync path cannot be read as one (too many files to hold open); one line."""


@dataclass
class Tree:
    """Regular files opened under a sync path: (path relative to it, "" for a file sync path;
    its descriptor), and what was left out, with why."""

    files: list[tuple[str, int]] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)

    def close(self) -> None:
        for _, fd in self.files:
            os.close(fd)
        self.files.clear()

    def left_out_line(self, src: str) -> str | None:
        """One line naming what was not uploaded, or None."""
        if not self.left_out:
            return None
        shown = ", ".join(self.left_out[:SHOWN])
        more = f" and {len(self.left_out) - SHOWN} more" if len(self.left_out) > SHOWN else ""
        return f"not uploaded from {src}: {shown}{more}"


def split_under(root: str, src: str) -> tuple[str, list[str]]:
    """(the root, the components of `src` below it). `src` is relative to the root, or an
    absolute path under it; without a root, its parent is the root. ValueError if `src`
    climbs out (`..`) or is not under the root."""
    path = PurePosixPath(src)
    if not root:
        if not path.is_absolute() or len(path.parts) < 2:
            raise ValueError(f"{src}: give --root, or an absolute --src")
        return str(path.parent), [path.name]
    if path.is_absolute():
        try:
            path = path.relative_to(root)
        except ValueError:
            raise ValueError(f"{src} is not under {root}") from None
    parts = [p for p in path.parts if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ValueError(f"{src} must name something under {root}, without '..'")
    return root, parts


def _open_at(name: str, dir_fd: int | None) -> int:
    return os.open(name, _OPEN, dir_fd=dir_fd)


def _why(exc: OSError) -> str:
    """Why a path was left out: a link (never followed), or what opening it said."""
    if exc.errno == errno.ELOOP:
        return "a symbolic link: never followed"
    return exc.strerror or type(exc).__name__


def open_tree(root: str, src: str, max_files: int | None = None) -> Tree:
    """Open every regular file of `src` (under `root`) as the module's docstring says;
    FileNotFoundError if `src` is not there at all."""
    root, parts = split_under(root, src)
    tree = Tree()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    for i, part in enumerate(parts):
        where = "/".join(parts[: i + 1])
        try:
            child = _open_at(part, fd)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                raise FileNotFoundError(errno.ENOENT, exc.strerror, src) from None
            tree.left_out.append(f"{where} ({_why(exc)})")
            return tree
        finally:
            os.close(fd)
        fd = child
        if i < len(parts) - 1 and not stat.S_ISDIR(os.fstat(fd).st_mode):
            os.close(fd)
            tree.left_out.append(f"{where} (not a folder)")
            return tree
    limit = max_files if max_files is not None else open_files_allowed()
    try:
        _take(fd, "", tree, limit)
    except BaseException:
        tree.close()
        raise
    return tree


def _take(fd: int, rel: str, tree: Tree, limit: int) -> None:
    """Keep `fd` (a regular file) in `tree`, or walk it (a folder); close what is not kept."""
    kind = stat.S_IFMT(os.fstat(fd).st_mode)
    if kind == stat.S_IFREG:
        if len(tree.files) >= limit:
            os.close(fd)
            raise TreeError(f"more than {limit} files to upload at once: sync fewer, larger files")
        tree.files.append((rel, fd))
        return
    if kind != stat.S_IFDIR:
        os.close(fd)
        tree.left_out.append(f"{rel or '.'} (not a regular file or folder)")
        return
    try:
        names = sorted(entry.name for entry in os.scandir(fd))
        for name in names:
            path = f"{rel}/{name}" if rel else name
            if any(tuple(path.split("/")[-len(i) :]) == i for i in _IGNORED):
                continue
            try:
                child = _open_at(name, fd)
            except OSError as exc:
                tree.left_out.append(f"{path} ({_why(exc)})")
                continue
            _take(child, path, tree, limit)
    finally:
        os.close(fd)


def open_files_allowed(spare: int = 64) -> int:
    """How many files this process may hold open, after raising its soft limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return max(1, (soft if soft != resource.RLIM_INFINITY else 1 << 20) - spare)


def copy_opened(files: list[tuple[str, int]], repo: str, dst: str) -> None:
    """A rehearsal's upload: each opened file (its path under the sync path; its descriptor)
    copied to `repo`/`dst`, with its mode and times."""
    base = Path(repo) / dst
    for rel, fd in files:
        target = base / rel if rel else base
        target.parent.mkdir(parents=True, exist_ok=True)
        st = os.fstat(fd)
        os.lseek(fd, 0, os.SEEK_SET)
        with open(target, "wb") as out:
            while chunk := os.read(fd, 1 << 20):
                out.write(chunk)
        os.chmod(target, stat.S_IMODE(st.st_mode))
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))


def commit_opened(
    api: HfApi, repo_id: str, repo_type: str, files: list[tuple[str, int]], dst: str
) -> str:
    """One commit of the opened files under `dst` (what the host's `upload_path` does for a
    path, from descriptors instead: nothing is opened by name again); returns the commit id."""
    from huggingface_hub import CommitOperationAdd

    readers = [open(fd, "rb", closefd=False) for _, fd in files]  # noqa: SIM115 - closed below
    try:
        operations = []
        for (rel, _), reader in zip(files, readers, strict=True):
            reader.seek(0)
            path = "/".join(p for p in (dst, rel) if p)
            operations.append(CommitOperationAdd(path_in_repo=path, path_or_fileobj=reader))
        info = api.create_commit(
            repo_id, operations, commit_message=f"colabq: upload {dst or '/'}", repo_type=repo_type
        )
    finally:
        for reader in readers:
            reader.close()
    return str(info.oid)
