"""The training repository as git sees it: the commit to ship, a dirty tree, the remote the VM
fetches from, and whether the commit is on that remote.

Every git call runs without a terminal prompt (`GIT_TERMINAL_PROMPT=0`, and ssh in batch mode
unless the user configured how git runs ssh): a remote that wants a password fails at once
instead of waiting for one. A remote URL carrying a credential is refused here, and the
credential is never repeated in a message.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from worker.errors import UserInputError

LOCAL_TIMEOUT_S = 60.0
REMOTE_TIMEOUT_S = 120.0
_SCP_LIKE = re.compile(r"^[\w.-]+@[\w.-]+:.+")


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_TRACE")}
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["LC_ALL"] = "C"  # git's messages are parsed here, and shown as one line
    return env | (extra or {})


def git(
    repo: Path,
    *args: str,
    timeout: float = LOCAL_TIMEOUT_S,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`git -C repo ARGS`, its output captured; a missing git or a hung call is one line."""
    try:
        return subprocess.run(
            ["git", "-C", str(repo), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=_env(env),
            check=False,
        )
    except FileNotFoundError:
        raise UserInputError("git is not installed here: install it to ship the code.") from None
    except subprocess.TimeoutExpired:
        raise UserInputError(
            f"`git {args[0]}` in {repo} took over {timeout:.0f}s: try again."
        ) from None


def first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0].removeprefix("fatal: ").removeprefix("error: ") if lines else ""


def toplevel(repo: Path) -> Path:
    done = git(repo, "rev-parse", "--show-toplevel")
    if done.returncode != 0:
        raise UserInputError(
            f"--repo-dir {repo} is not in a git repository: code: git or snapshot ships a "
            "commit (run git init and commit), or leave code: out to send the script alone."
        )
    return Path(done.stdout.strip()).resolve()


def commit_of(top: Path, rev: str) -> str | None:
    """The full SHA of the commit `rev` names, or None."""
    if rev.startswith("-"):
        return None
    done = git(top, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    sha = done.stdout.strip()
    return sha if done.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", sha) else None


def resolve_commit(top: Path, rev: str | None) -> tuple[str, bool]:
    """(the commit to ship, whether it is HEAD's): `rev` resolved, else HEAD."""
    head = commit_of(top, "HEAD")
    if rev is None:
        if head is None:
            raise UserInputError(
                f"{top} has no commit yet: commit the code to ship (git add, git commit)."
            )
        return head, True
    sha = commit_of(top, rev)
    if sha is None:
        raise UserInputError(
            f"--commit {rev}: no such commit in {top} (give a SHA, branch or tag; git log)."
        )
    return sha, sha == head


def dirty_files(top: Path) -> tuple[str, ...]:
    """Tracked files whose working copy or index differs from HEAD (untracked files aside)."""
    done = git(top, "status", "--porcelain=v1", "-z", "--untracked-files=no")
    if done.returncode != 0:
        raise UserInputError(f"git status failed in {top}: {first_line(done.stderr)}.")
    entries = done.stdout.split("\0")
    paths: list[str] = []
    skip = False
    for entry in entries:
        if skip:  # a rename's second field: its old path
            skip = False
            continue
        if len(entry) > 3:
            paths.append(entry[3:])
            skip = entry[0] in "RC"
    return tuple(paths)


def tracked(top: Path, commit: str, paths: list[str]) -> set[str]:
    """Those of `paths` (relative to `top`, files or folders) that are files in `commit`."""
    if not paths:
        return set()
    done = git(top, "ls-tree", "-r", "-z", "--name-only", "--full-tree", commit, "--", *paths)
    return {p for p in done.stdout.split("\0") if p}


def tree_stats(top: Path, commit: str) -> tuple[int, int]:
    """(files, bytes) of the commit's tree: what `git archive` of it holds."""
    done = git(top, "ls-tree", "-r", "-l", "-z", "--full-tree", commit)
    files = size = 0
    for entry in done.stdout.split("\0"):
        meta, _, _path = entry.partition("\t")
        parts = meta.split()
        if len(parts) == 4 and parts[1] == "blob":
            files += 1
            size += int(parts[3]) if parts[3].isdigit() else 0
    return files, size


def show(top: Path, commit: str, path: str) -> str | None:
    """A file's text at `commit` (`path` relative to the top), or None if it is not there."""
    done = git(top, "show", f"{commit}:{path}")
    return done.stdout if done.returncode == 0 else None


def differs(top: Path, commit: str, paths: list[str]) -> bool:
    """Whether the working copy of `paths` differs from `commit`'s."""
    return git(top, "diff", "--quiet", commit, "--", *paths).returncode != 0


@dataclass(frozen=True)
class Remote:
    name: str
    url: str  # the fetch URL, as the VM uses it


def remote_of(top: Path) -> Remote:
    """The current branch's upstream remote, else `origin`, with its fetch URL."""
    name = "origin"
    branch = git(top, "symbolic-ref", "--quiet", "--short", "HEAD").stdout.strip()
    if branch:
        upstream = git(top, "config", f"branch.{branch}.remote").stdout.strip()
        if upstream and upstream != ".":
            name = upstream
    done = git(top, "remote", "get-url", name)
    if done.returncode != 0:
        raise UserInputError(
            f"{top} has no remote {name!r}: add one (git remote add {name} URL) and push, "
            "or use code: snapshot."
        )
    url = done.stdout.strip()
    if problem := credential_problem(name, url):
        raise UserInputError(problem)
    return Remote(name, absolute_path_url(top, url))


def credential_problem(name: str, url: str) -> str | None:
    """Why `url` cannot be shipped: it carries a credential (shown redacted), or None."""
    if "://" not in url:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return f"The remote {name}'s URL is not a well-formed URL: fix it (git remote -v)."
    if parts.password is None and not (parts.scheme in ("http", "https") and parts.username):
        return None
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    clean = urlunsplit((parts.scheme, host, parts.path, parts.query, ""))
    return (
        f"The remote {name}'s URL carries a credential: set it without one (git remote set-url "
        f"{name} {clean}), keep the token in a git credential helper, and give worker hosts a "
        "read credential in COLABQ_GIT_CREDENTIALS_FILE."
    )


def absolute_path_url(top: Path, url: str) -> str:
    """A remote given as a relative path (a rehearsal's local bare repository) made absolute:
    the VM does not run in the repository's folder."""
    if "://" in url or _SCP_LIKE.match(url) or url.startswith("/"):
        return url
    path = (top / url).resolve()
    return str(path) if path.exists() else url


@dataclass(frozen=True)
class OnRemote:
    """Whether the commit is on the remote: True (a ref there reaches it), False (no ref this
    clone knows reaches it), None (the remote could not be listed: `problem` says why)."""

    found: bool | None
    ref: str = ""  # the remote's ref that reaches the commit
    problem: str = ""


def on_remote(top: Path, remote: Remote, commit: str) -> OnRemote:
    """`git ls-remote` of the remote's refs, then: the commit is one of them, or an ancestor of
    one this clone has (`git rev-list` of the commit excluding them all, one call)."""
    done = git(top, "ls-remote", remote.name, timeout=REMOTE_TIMEOUT_S, env=_batch_ssh(top))
    if done.returncode != 0:
        return OnRemote(None, problem=first_line(done.stderr) or f"exit {done.returncode}")
    refs: dict[str, str] = {}
    for line in done.stdout.splitlines():
        sha, _, ref = line.partition("\t")
        refs.setdefault(sha.strip(), ref.strip())
    if commit in refs:
        return OnRemote(True, refs[commit])
    known = _local_commits(top, list(refs))
    if not known:
        return OnRemote(False)
    stdin = "".join(f"^{sha}\n" for sha in known)
    done = git(top, "rev-list", "--max-count=1", "--stdin", commit, stdin=stdin)
    if done.returncode == 0 and not done.stdout.strip():
        ref = next(
            (
                refs[s]
                for s in known
                if git(top, "merge-base", "--is-ancestor", commit, s).returncode == 0
            ),
            "",
        )
        return OnRemote(True, ref)
    return OnRemote(False)


def _batch_ssh(top: Path) -> dict[str, str]:
    """ssh in batch mode (no passphrase prompt), unless the user chose how git runs ssh."""
    if os.environ.get("GIT_SSH_COMMAND") or os.environ.get("GIT_SSH"):
        return {}
    if git(top, "config", "core.sshCommand").stdout.strip():
        return {}
    return {"GIT_SSH_COMMAND": "ssh -o BatchMode=yes"}


def _local_commits(top: Path, shas: list[str]) -> list[str]:
    """Those of `shas` this clone has as commits (a tag object or an unknown SHA is left out)."""
    if not shas:
        return []
    done = git(
        top, "cat-file", "--batch-check=%(objectname) %(objecttype)", stdin="\n".join(shas) + "\n"
    )
    return [ln.split()[0] for ln in done.stdout.splitlines() if ln.endswith(" commit")]
