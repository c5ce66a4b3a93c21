"""A settings file whose password a git repository could carry off: a dotenv file (the current
folder's `.env`, or the one `--env-file` names) that holds a password or a token and sits in a
git work tree, where one `git add` puts it in the repository's history (submitting from a
training repository is what colabq is for). `colabq doctor` warns about each one found; reading
it is never this module's decision (`worker.settingsfiles`).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from worker.settingsfiles import named_file

# Variable names whose values are secrets wherever they appear.
_SECRET_NAME = re.compile(r"PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY", re.IGNORECASE)


@dataclass(frozen=True)
class Exposed:
    """A dotenv file holding secrets (`names`) inside the git work tree `repo`."""

    path: Path
    names: tuple[str, ...]
    repo: Path
    ignored: bool | None  # whether git ignores it (None: git could not say)

    def detail(self) -> str:
        git = {
            True: "git ignores it, but every copy of the folder carries it",
            False: "git does not ignore it: `git add` would commit it",
            None: "git could not say whether it ignores it",
        }[self.ignored]
        return f"{self.path} holds {', '.join(self.names)} in the git repository {self.repo}; {git}"

    def todo(self, user_file: Path) -> str:
        return (
            f"move its lines to {user_file} (chmod 600) and delete {self.path}; colabq reads a "
            ".env only with --env-file"
        )


def secret_names(path: Path) -> tuple[str, ...]:
    """The variables of the dotenv file `path` whose values are secrets: a URL with a password
    (`redis://:PASSWORD@...`), or a name that says password, secret, token or API key."""
    from dotenv import dotenv_values

    found = []
    for name, value in dotenv_values(path).items():
        if not value:
            continue
        try:
            has_password = bool(urlsplit(value).password)
        except ValueError:
            has_password = False
        if has_password or _SECRET_NAME.search(name):
            found.append(name)
    return tuple(found)


def git_work_tree(path: Path) -> Path | None:
    """The git work tree `path` lies in (a folder above it holding `.git`), or None."""
    for folder in path.resolve().parents:
        if (folder / ".git").exists():
            return folder
    return None


def git_ignores(path: Path, repo: Path, timeout_s: float = 5.0) -> bool | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), "check-ignore", "-q", str(path.resolve())],
            stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {0: True, 1: False}.get(done.returncode)


def find_exposed(cwd: Path, environ: Mapping[str, str]) -> list[Exposed]:
    """The current folder's `.env` and the `--env-file`, each if it holds a secret inside a
    git work tree."""
    candidates = [cwd / ".env"]
    named = named_file(environ)
    if named is not None and named.resolve() != candidates[0].resolve():
        candidates.append(named)
    found = []
    for path in candidates:
        if not path.is_file():
            continue
        repo = git_work_tree(path)
        try:
            names = secret_names(path) if repo is not None else ()
        except OSError:
            continue
        if repo is not None and names:
            found.append(Exposed(path, names, repo, git_ignores(path, repo)))
    return found
