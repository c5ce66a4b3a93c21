"""A snapshot of the repository: `git archive` of the commit, plus the untracked files the job
declared (`include:`), plus `.colabq-commit` (the commit, one line), as one .tar.gz.

The archive is deterministic (the commit's time on every entry, no owner, gzip without a
timestamp), and its name says what it holds: `code/<commit>.tar.gz`, or
`code/<commit>-<digest>.tar.gz` with the digest of the included files' names and contents, so
an archive already staged under that name is the same archive.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

from producer.code.gitrepo import first_line, git, tracked
from worker.errors import UserInputError

COMMIT_FILE = ".colabq-commit"


@dataclass(frozen=True)
class Included:
    arcname: str  # relative to the repository's top, as it lands on the VM
    path: Path  # on this machine


def resolve_includes(
    top: Path, repo_dir: Path, commit: str, include: tuple[str, ...]
) -> tuple[Included, ...]:
    """The files `include:` names (relative to --repo-dir; a folder: every file below it) that
    the commit does not hold. A tracked file, a path outside the repository or a missing one is
    refused in one line."""
    found: dict[str, Included] = {}
    for item in include:
        path = (repo_dir / item).resolve() if not Path(item).is_absolute() else Path(item)
        if not path.is_relative_to(top) or path == top:
            raise UserInputError(f"include {item}: name a file or folder inside {top}.")
        if not path.exists():
            raise UserInputError(f"include {item}: {path} does not exist.")
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        rel = {f.relative_to(top).as_posix(): f for f in files if ".git" not in f.parts}
        in_commit = tracked(top, commit, list(rel))
        if path.is_file() and in_commit:
            raise UserInputError(
                f"include {item}: it is in commit {commit[:12]} already; include: adds "
                "untracked files (data, weights, generated code)."
            )
        added = {a: Included(a, f) for a, f in rel.items() if a not in in_commit}
        if not added:
            raise UserInputError(f"include {item}: holds no untracked file to add.")
        found.update(added)
    return tuple(found[a] for a in sorted(found))


def include_digest(includes: tuple[Included, ...]) -> str:
    """12 hex digits naming the included files' names and contents; "" when there are none."""
    if not includes:
        return ""
    h = hashlib.sha256()
    for inc in includes:
        h.update(inc.arcname.encode() + b"\0")
        with inc.path.open("rb") as f:
            h.update(hashlib.file_digest(f, "sha256").digest())
    return h.hexdigest()[:12]


def archive_name(commit: str, digest: str) -> str:
    return f"code/{commit}-{digest}.tar.gz" if digest else f"code/{commit}.tar.gz"


def build_archive(top: Path, commit: str, includes: tuple[Included, ...], out: Path) -> int:
    """Write the snapshot to `out` (a .tar.gz); returns the number of files in it."""
    plain = out.with_name(out.name + ".tar")
    done = git(top, "archive", "--format=tar", "-o", str(plain), commit)
    if done.returncode != 0:
        raise UserInputError(f"git archive of {commit[:12]} failed: {first_line(done.stderr)}.")
    when = int(git(top, "log", "-1", "--format=%ct", commit).stdout.strip() or 0)
    with tarfile.open(plain, "a", format=tarfile.PAX_FORMAT) as tar:
        for inc in includes:
            info = _entry(inc.arcname, inc.path.stat().st_size, when)
            info.mode = 0o755 if inc.path.stat().st_mode & 0o111 else 0o644
            with inc.path.open("rb") as f:
                tar.addfile(info, f)
        marker = f"{commit}\n".encode()
        tar.addfile(_entry(COMMIT_FILE, len(marker), when), io.BytesIO(marker))
        files = sum(1 for m in tar.getmembers() if m.isfile() or m.issym())
    with (
        plain.open("rb") as src,
        out.open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz,
    ):
        shutil.copyfileobj(src, gz, 1 << 20)
    plain.unlink()
    return files


def _entry(name: str, size: int, when: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, when, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info
