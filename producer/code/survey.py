"""One look at the repository a job ships: `survey(CodeRequest) -> CodeState`.

A request that cannot name a commit to ship (not a git repository, an unknown `--commit`, no
remote, a remote URL carrying a credential, an include that is not there) is refused in one
line. Everything else is recorded for the pre-flight (`checks.py`) to judge: a dirty tree, a
commit not on the remote, a uv lock out of step. A submit surveys each distinct request once.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from producer.code import gitrepo, uvcheck
from producer.code.snapshot import Included, include_digest, resolve_includes
from worker.errors import UserInputError

MODES = ("git", "snapshot")
UV_FILES = ("pyproject.toml", "uv.lock")


@dataclass(frozen=True)
class CodeRequest:
    """What the user asked to ship: `code:` mode, `--repo-dir`, `--commit`, `include:`."""

    mode: str
    repo: Path
    rev: str | None = None
    include: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise UserInputError(f"code: {self.mode!r}: use git or snapshot.")
        if self.include and self.mode != "snapshot":
            raise UserInputError(
                "include: adds untracked files to a snapshot; a git job fetches the commit "
                "alone (use code: snapshot, or commit the files)."
            )


@dataclass(frozen=True)
class Environment:
    """The uv project at the job's folder in the shipped commit, and its lock's state."""

    uv: bool = False  # pyproject.toml and uv.lock both in the commit
    pyproject_only: bool = False  # pyproject.toml without uv.lock
    python: str = ""
    lock: uvcheck.LockCheck | None = None  # None: not checked (see `unchecked`)
    unchecked: str = ""  # why the lock was not checked


@dataclass(frozen=True)
class CodeState:
    request: CodeRequest
    top: Path  # the repository's top folder
    subdir: str  # the job's folder, relative to the top ("" for the top)
    commit: str
    is_head: bool
    dirty: tuple[str, ...]  # tracked files changed (only when shipping HEAD's commit)
    remote: gitrepo.Remote | None = None  # git mode
    on_remote: gitrepo.OnRemote | None = None
    includes: tuple[Included, ...] = ()
    digest: str = ""  # of the includes
    files: int = 0  # what a snapshot holds, .colabq-commit included
    size_bytes: int = 0  # before compression
    env: Environment = field(default_factory=Environment)

    @property
    def mode(self) -> str:
        return self.request.mode

    @property
    def short(self) -> str:
        return self.commit[:12]


def survey(request: CodeRequest) -> CodeState:
    repo = request.repo.resolve()
    if not repo.is_dir():
        raise UserInputError(f"--repo-dir {request.repo}: not a folder (the training repository).")
    top = gitrepo.toplevel(repo)
    subdir = repo.relative_to(top).as_posix() if repo != top else ""
    commit, is_head = gitrepo.resolve_commit(top, request.rev)
    dirty = gitrepo.dirty_files(top) if is_head else ()
    state = CodeState(
        request, top, subdir, commit, is_head, dirty, env=_environment(top, subdir, commit)
    )
    if request.mode == "git":
        remote = gitrepo.remote_of(top)
        return dataclasses.replace(
            state, remote=remote, on_remote=gitrepo.on_remote(top, remote, commit)
        )
    includes = resolve_includes(top, repo, commit, request.include)
    files, size = gitrepo.tree_stats(top, commit)
    files += len(includes) + 1
    size += sum(inc.path.stat().st_size for inc in includes) + len(commit) + 1
    return dataclasses.replace(
        state, includes=includes, digest=include_digest(includes), files=files, size_bytes=size
    )


def _environment(top: Path, subdir: str, commit: str) -> Environment:
    def at(name: str) -> str:
        return f"{subdir}/{name}" if subdir else name

    pyproject = gitrepo.show(top, commit, at("pyproject.toml"))
    lock = gitrepo.show(top, commit, at("uv.lock"))
    if pyproject is None or lock is None:
        return Environment(pyproject_only=pyproject is not None and lock is None)
    python = uvcheck.python_pin(gitrepo.show(top, commit, at(".python-version")), pyproject)
    if gitrepo.differs(top, commit, [at(n) for n in UV_FILES]):
        why = f"the working copy's pyproject.toml or uv.lock differs from commit {commit[:12]}'s"
        return Environment(uv=True, python=python, unchecked=why)
    uv = uvcheck.find_uv()
    if uv is None:
        return Environment(uv=True, python=python, unchecked="no uv")
    return Environment(uv=True, python=python, lock=uvcheck.lock_check(uv, top / subdir))
