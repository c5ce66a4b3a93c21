"""The path guard in front of every local cleanup: nothing outside the run's own folder.

Owns `check_local_run_dir`, called before the first cleanup step (removing the run's local
checkpoint folder) and before anything else that deletes a local path for a run. It refuses
`/`, a home folder, a path with `..` or `~`, a symlink that leads out of the run's folder, and a
run folder that is itself `/`, a home folder, a folder holding home folders, or top-level.
It only decides; deleting is the caller's.
"""

from __future__ import annotations

import contextlib
import os
import pwd
from pathlib import Path

from worker.errors import UserInputError

_HOME_PARENTS = (Path("/home"), Path("/Users"))


class UnsafeCleanupPath(UserInputError):
    """A path the cleanup must not delete; nothing was deleted."""

    hint = "Only the run's own folder, or something inside it, is ever cleaned up."

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"Refusing to clean up {str(path)!r}: {reason}.")
        self.path = str(path)
        self.reason = reason


def home_folders() -> frozenset[Path]:
    """Every home folder this machine knows of (password database, $HOME, /root)."""
    homes = {Path("/root")}
    with contextlib.suppress(OSError):
        homes.update(Path(entry.pw_dir) for entry in pwd.getpwall() if entry.pw_dir)
    with contextlib.suppress(RuntimeError):  # no $HOME and no password entry
        homes.add(Path.home())
    return frozenset(Path(os.path.realpath(h)) for h in homes if h.is_absolute() and h != Path("/"))


def _is_home(path: Path, homes: frozenset[Path]) -> bool:
    return path in homes or path.parent in _HOME_PARENTS


def _refuse_dangerous(path: Path, what: str, homes: frozenset[Path]) -> None:
    if path == Path(path.anchor):
        raise UnsafeCleanupPath(path, f"{what} is the filesystem root")
    if _is_home(path, homes):
        raise UnsafeCleanupPath(path, f"{what} is a home folder")
    if any(home.is_relative_to(path) for home in homes) or path in _HOME_PARENTS:
        raise UnsafeCleanupPath(path, f"{what} holds home folders")
    if len(path.parts) < 3:
        raise UnsafeCleanupPath(path, f"{what} is a top-level folder")


def _refuse_spelling(raw: str, what: str) -> None:
    if not raw.strip():
        raise UnsafeCleanupPath(raw, f"{what} is empty")
    if raw.startswith("~"):
        raise UnsafeCleanupPath(raw, f"{what} names a home folder ('~')")
    if ".." in Path(raw).parts:
        raise UnsafeCleanupPath(raw, f"{what} contains '..'")


def check_local_run_dir(path: Path, run_root: Path) -> Path:
    """The resolved path, if it is `run_root` (the run's own folder) or inside it; else raise.

    A relative `path` is taken relative to `run_root`, which must be absolute. Both the path as
    written and the path with every symlink followed must stay inside the run's folder.
    """
    homes = home_folders()
    _refuse_spelling(str(run_root), "the run folder")
    _refuse_spelling(str(path), "the path")
    if not run_root.is_absolute():
        raise UnsafeCleanupPath(run_root, "the run folder must be an absolute path")
    root_written = Path(os.path.normpath(run_root))
    root_real = Path(os.path.realpath(run_root))
    for root in {root_written, root_real}:
        _refuse_dangerous(root, "the run folder", homes)
    target = Path(os.path.normpath(path if path.is_absolute() else run_root / path))
    real = Path(os.path.realpath(target))
    for candidate in (target, real):
        _refuse_dangerous(candidate, "the path", homes)
    if not target.is_relative_to(root_written):
        raise UnsafeCleanupPath(path, f"it is outside the run's folder {root_written}")
    if not real.is_relative_to(root_real):
        raise UnsafeCleanupPath(
            path, f"it leads through a symlink to {real}, outside the run's folder {root_real}"
        )
    return real
