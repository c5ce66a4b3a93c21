"""The artifact store seam: where a job's results are durably kept, and proof that they are.

`ArtifactStore` is what the runner depends on. `LocalStore` serves `kind="local"` destinations
(rehearsals on the emulator, whose "VM" writes to this machine's disk); the Hub store
(`hub.py`, built on this module's layout and `Verification`) serves `kind="hf"`; `build.py`
picks one for a destination. Layout, both kinds: `<prefix>/logs/<job>/{job.log,exit_code}`, the
VM's console as the final upload found it (`console_name`), and `<prefix>/<basename of each sync
path>`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from worker.errors import StoreError
from worker.spec import ArtifactDest, JobSpec


@dataclass(frozen=True)
class Verification:
    ok: bool
    exit_code: int | None
    present: tuple[str, ...]
    missing: tuple[str, ...]
    detail: str

    def summary(self) -> str:
        if self.ok:
            return f"verified: exit_code={self.exit_code}, {len(self.present)} artifact(s) present"
        return f"not verified: {self.detail}"


class ArtifactStore(Protocol):
    def location(self, spec: JobSpec) -> str: ...

    def verify(self, spec: JobSpec) -> Verification: ...

    def checkpoint_uri(self, spec: JobSpec) -> str | None:
        """Where a restarted segment resumes from: the job's own synced checkpoint (its first
        sync path in the store), if it holds data; None otherwise."""
        ...

    def check_destination(self, dest: ArtifactDest) -> str:
        """Before allocation: the destination exists or can be created, and is safe to write
        (for the Hub: private and writable with the job's token). Returns what it found."""
        ...

    def console_tail(self, spec: JobSpec, segment: int, offset: int) -> bytes | None:
        """The bytes from `offset` on of the VM console the segment's final upload stored
        (empty if it holds no more); None when the store holds no such copy."""
        ...


def logs_path(spec: JobSpec) -> str:
    return _join(spec.artifact.prefix, "logs", spec.job_id)


def console_name(segment: int) -> str:
    """The stored copy of a segment's VM console, beside its `job.log` (the wrapper's
    CONSOLE_COPY: segment 0's has no number, as its job.log has none)."""
    return "console.log" if segment == 0 else f"console.s{segment}.log"


def read_from(path: Path, offset: int) -> bytes | None:
    """`path`'s bytes from `offset` on; None if there is no such file (a folder of its path
    being something else included); `StoreError` if it cannot be read."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(offset, 0))
            return fh.read()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except OSError as exc:
        raise StoreError(f"Cannot read {path}: {exc.strerror or exc}.") from exc


def artifact_path(spec: JobSpec, name: str) -> str:
    return _join(spec.artifact.prefix, name)


def _join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p.strip("/"))


def _non_empty(p: Path) -> bool:
    if p.is_file():
        return p.stat().st_size > 0
    return p.is_dir() and any(f.is_file() and f.stat().st_size > 0 for f in p.rglob("*"))


def parse_exit_code(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


class LocalStore:
    """A folder on this machine standing in for the Hub repo (`ArtifactDest.repo` is its path)."""

    def check_destination(self, dest: ArtifactDest) -> str:
        # The VM writes there itself; its first upload is the real test (and must succeed).
        return f"local folder {dest.repo}"

    def location(self, spec: JobSpec) -> str:
        return str(Path(spec.artifact.repo) / spec.artifact.prefix)

    def checkpoint_uri(self, spec: JobSpec) -> str | None:
        if not spec.sync_paths:
            return None
        path = Path(spec.artifact.repo) / artifact_path(spec, Path(spec.sync_paths[0]).name)
        return f"file://{path}" if _non_empty(path) else None

    def console_tail(self, spec: JobSpec, segment: int, offset: int) -> bytes | None:
        path = Path(spec.artifact.repo) / logs_path(spec) / console_name(segment)
        return read_from(path, offset)

    def verify(self, spec: JobSpec) -> Verification:
        root = Path(spec.artifact.repo)
        exit_file = root / logs_path(spec) / "exit_code"
        exit_code = parse_exit_code(exit_file.read_text()) if exit_file.is_file() else None
        present, missing = [], []
        for name in (f"logs/{spec.job_id}/exit_code", *spec.expected_artifacts):
            p = root / artifact_path(spec, name)
            if _non_empty(p):
                present.append(name)
            else:
                missing.append(name)
        ok = not missing and exit_code is not None
        detail = "" if ok else f"missing: {', '.join(missing) or 'a readable exit_code'}"
        return Verification(ok, exit_code, tuple(present), tuple(missing), detail)
