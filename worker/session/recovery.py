"""Recovering the only copy of a job's results from a retained VM (invariant 4).

When the final upload failed, the wrapper keeps the VM; before anything releases it, the job's
folder on the VM is copied to the worker host with `colab ls` / `colab download` (the Contents API
answers even while a kernel is busy). One recoverer at a time: a file lock in the job's folder,
shared by the runner and the watchdog.
"""

from __future__ import annotations

import fcntl
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from worker.colab.driver import ColabDriver
from worker.errors import ColabError


@dataclass(frozen=True)
class Recovery:
    ok: bool
    local_dir: Path
    files: tuple[str, ...]
    failed: tuple[str, ...]

    def summary(self) -> str:
        if self.ok:
            return f"recovered {len(self.files)} file(s) to {self.local_dir}"
        return f"recovered {len(self.files)} file(s); FAILED: {', '.join(self.failed)}"


@contextmanager
def recovery_lock(path: Path) -> Iterator[None]:
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def list_remote(driver: ColabDriver, name: str, remote_dir: str) -> list[str]:
    """Every file under `remote_dir`, as paths relative to it (`ls` marks folders with `/`)."""
    out: list[str] = []
    todo = [""]
    while todo:
        rel = todo.pop()
        for entry in driver.ls(name, f"{remote_dir}/{rel}".rstrip("/")):
            if entry.endswith("/"):
                todo.append(f"{rel}{entry}")
            else:
                out.append(f"{rel}{entry}")
    return sorted(out)


def recover_results(
    driver: ColabDriver,
    name: str,
    remote_dir: str,
    local_dir: Path,
    *,
    log: Callable[[str], None],
    lock_path: Path,
) -> Recovery:
    with recovery_lock(lock_path):
        done_marker = local_dir / ".complete"
        if done_marker.exists():
            files = tuple(
                sorted(
                    str(p.relative_to(local_dir))
                    for p in local_dir.rglob("*")
                    if p.is_file() and p != done_marker
                )
            )
            return Recovery(True, local_dir, files, ())
        local_dir.mkdir(parents=True, exist_ok=True)
        got: list[str] = []
        failed: list[str] = []
        try:
            remote_files = list_remote(driver, name, remote_dir)
        except ColabError as exc:
            log(f"cannot list {remote_dir} on the VM: {exc}")
            return Recovery(False, local_dir, (), (remote_dir,))
        for rel in remote_files:
            target = local_dir / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                driver.download(name, f"{remote_dir}/{rel}", target)
                got.append(rel)
            except ColabError as exc:
                log(f"download of {rel} failed: {exc}")
                failed.append(rel)
        ok = not failed and bool(got)
        if ok:
            done_marker.write_text("\n".join(got))
        return Recovery(ok, local_dir, tuple(got), tuple(failed))
