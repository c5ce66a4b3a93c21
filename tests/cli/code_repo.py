"""A training repository that ships its code: `make_repo`'s files as a uv project (no
dependencies, locked offline) in a git repository whose remote is a local bare repository."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.cli.training_repo import make_repo

UV = str(Path(sys.executable).parent / "uv")
# uv never reaches the network in these tests (the project has no dependencies).
UV_ENV = {"UV_OFFLINE": "1", "UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1"}
PIN = f"{sys.version_info.major}.{sys.version_info.minor}"
PYPROJECT = """\
[project]
name = "coco-detr"
version = "0.1.0"
requires-python = ">={pin}"
dependencies = []
"""


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=colabq tests", "-c", "user.email=tests@colabq.invalid",
         "-C", str(repo), *args],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return done.stdout.strip()


def uv_lock(repo: Path) -> None:
    env = {**os.environ, **UV_ENV}
    subprocess.run([UV, "lock", "-q"], cwd=repo, env=env, check=True, timeout=120)


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def code_repo(root: Path) -> tuple[Path, Path]:
    """(the repository, its bare remote `origin`), with one commit pushed."""
    repo = make_repo(root / "repo")
    (repo / "pyproject.toml").write_text(PYPROJECT.format(pin=PIN))
    (repo / ".python-version").write_text(f"{PIN}\n")
    (repo / ".gitignore").write_text("store/\nweights/\n")
    uv_lock(repo)
    remote = root / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True, timeout=60)
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "a uv project")
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "-u", "origin", "main")
    return repo, remote


def tree_files(repo: Path, commit: str) -> set[str]:
    return set(git(repo, "ls-tree", "-r", "--name-only", commit).splitlines())
