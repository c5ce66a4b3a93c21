"""Which destinations a user may send results to, and with which of the worker hosts' Hub tokens
(issue 26): a token belongs to owners, and a job can never name another user's destination.

**Who.** Under Redis ACLs the user is the ACL user (the gate's stream key, a job id's owner);
without them it is `submitted_by` up to its `@`, as the submitting machine said it (such a
deployment trusts everyone who has the Redis password). A user's file name is that name
lowercased, anything but letters, digits, `.`, `_`, `-` spelled `_`.

**Which token.** The worker hosts keep 0600 token files (never in Redis, where users write):

1. `<hf_token_dir>/dest/<owner>__<repo>`, a deployment token for one Hub repo: it serves the users
   an operator lists beside it, in `dest/<owner>__<repo>.users` (one name a line, `#` comments,
   `*` for every user; not writable by group or others). Without a list it serves nobody under
   ACLs and everyone without them (as before). When this file exists, the host's token below is
   never used for that repo: the operator assigned the repo its own token.
2. `<hf_token_dir>/user/<name>`, the user's own: it serves that user alone, for the Hub
   namespaces and repos its whoami says it can write (`worker.people.tokenscope`).
3. `COLABQ_HF_TOKEN_FILE`, the deployment's token: it serves the users listed in the `.users` file
   beside it, as (1) does.

The first that serves the job is its token (uploads, downloads and, with `secrets: [hf_token]`,
the job's own copy). A job that needs one (a Hub destination, or `secrets: [hf_token]`) when a
token exists but none serves its user is the job's failure, one line (`NotYourDestination`);
when no token file exists at all it is the host's (another host may hold one). A token file that
is bad (mode, size), or a list others may write, is the host's failure, named.

**Local paths.** A `local:` destination and a `file://` code snapshot are folders of the worker
host that the emulated VM writes and reads as the worker's user. With `COLABQ_LOCAL_STORE_ROOT`
set they must lie under it (resolved, links and all); without it they may lie anywhere when there
are no ACLs, and nowhere under ACLs.

`check_destination` is the gate's check of a submitted spec; the worker checks again before
allocation (`worker.session.hubtoken`), trusting no gate.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from worker.errors import SecretFileError, UserInputError
from worker.people.identity import NO_ACL_USER
from worker.people.tokenscope import TokenScope, token_scope
from worker.session.checks import check_token_file
from worker.settings import Settings
from worker.spec import JobSpec

_UNSAFE = re.compile(r"[^a-z0-9._-]")
EVERYONE = "*"
Scope = Callable[[Path], TokenScope]  # a user's token file -> where it may write


class NotYourDestination(UserInputError):
    """Tokens exist for the job's destination, and none serves the job's user."""


class NoHubToken(SecretFileError):
    """The job needs a Hub token and this host holds none for it."""


def user_key(submitted_by: str) -> str | None:
    """The name of a submitting user's token file, or None (nobody to name)."""
    name = _UNSAFE.sub("_", submitted_by.partition("@")[0].strip().lower())
    return name if name.strip("._") else None


def dest_key(repo: str) -> str:
    """The name of a destination's token file: `OWNER/NAME` as `OWNER__NAME`."""
    return repo.replace("/", "__")


@dataclass(frozen=True)
class JobUser:
    """The user a job's tokens must belong to: `name` (its token file's name; None: nobody),
    and whether Redis authenticated it (an ACL user) or the submitting machine said it."""

    name: str | None
    authenticated: bool

    @classmethod
    def of(cls, acl_user: str | None, submitted_by: str) -> JobUser:
        if acl_user and acl_user != NO_ACL_USER:
            return cls(user_key(acl_user), True)
        return cls(user_key(submitted_by), False)

    def __str__(self) -> str:
        return self.name or "an unnamed user"


@dataclass(frozen=True)
class Grant:
    """The token a job uses (None: none applies), whose it is, and every file looked for."""

    path: Path | None
    whose: str  # "destination", "user", "host" or "none"
    expected: tuple[Path, ...] = ()


def users_file(token: Path) -> Path:
    return token.with_name(token.name + ".users")


def serves(token: Path, user: JobUser) -> bool:
    """Whether a deployment token's list names `user` (no list: everyone without ACLs)."""
    path = users_file(token)
    try:
        st = path.stat()
        text = path.read_text()
    except FileNotFoundError:
        return not user.authenticated
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise SecretFileError(f"Cannot read {path} ({why}): fix its permissions.") from None
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise SecretFileError(f"{path} is writable by others; run `chmod go-w {path}`.")
    names = {line.split("#", 1)[0].strip() for line in text.splitlines()}
    listed = {key for name in names if (key := user_key(name)) is not None}
    return EVERYONE in names or (user.name is not None and user.name in listed)


def choose(user: JobUser, spec: JobSpec, settings: Settings, scope: Scope | None = None) -> Grant:
    """The token that serves `spec` for `user` on this host, as the module's docstring says."""
    scope = scope or (lambda path: token_scope(path, settings, time.time()))
    hub = spec.artifact.kind == "hf"
    repo, kind = spec.artifact.repo, spec.artifact.repo_type
    folder, host = settings.hf_token_dir, settings.hf_token_file
    looked: list[Path] = []
    why: list[str] = []
    assigned = False
    if folder is not None and hub:
        path = folder / "dest" / dest_key(repo)
        looked.append(path)
        if assigned := _present(path, "The destination's token file"):
            if serves(path, user):
                return Grant(path, "destination", tuple(looked))
            why.append(f"{path} is not {user}'s ({users_file(path).name} does not list them)")
    if folder is not None and user.name is not None:
        path = folder / "user" / user.name
        looked.append(path)
        if _present(path, "The user's token file"):
            if not hub or (own := scope(path)).can_write(repo, kind):
                return Grant(path, "user", tuple(looked))
            why.append(f"{user}'s own token writes only {own.describe()}")
    if host is not None:
        looked.append(host)
        check_token_file(host, "Token file")
        if not assigned and serves(host, user):
            return Grant(host, "host", tuple(looked))
        if not assigned:
            why.append(f"{host} is not {user}'s ({users_file(host).name} does not list them)")
    needs = hub or "hf_token" in spec.secrets
    if needs and why:
        where = f"hf:{repo}" if hub else "secrets: [hf_token]"
        raise NotYourDestination(
            f"{where} is not {user}'s to use: {'; '.join(why)}. Send results to a repo your "
            "own token can write, or ask an operator to list you beside a token that may write "
            "it (its .users file)."
        )
    if needs:
        raise NoHubToken(_missing(spec, settings, tuple(looked)))
    return Grant(None, "none", tuple(looked))


def _present(path: Path, what: str) -> bool:
    if not (path.exists() or path.is_symlink()):
        return False
    check_token_file(path, what)  # as before: "... has mode 0644; run `chmod ...`"
    return True


def _missing(spec: JobSpec, settings: Settings, expected: tuple[Path, ...]) -> str:
    why = "a Hub destination" if spec.artifact.kind == "hf" else "secrets: [hf_token]"
    if settings.hf_token_dir is None:
        return f"{why} needs COLABQ_HF_TOKEN_FILE on the worker host"
    files = " or ".join(str(p) for p in expected) or f"{settings.hf_token_dir}/dest/..."
    return f"{why} needs a Hub token on the worker host: none of {files} exists"


def local_paths(spec: JobSpec) -> list[tuple[str, str]]:
    """(what, path) of every folder of the worker host the job names."""
    found = []
    if spec.artifact.kind == "local":
        found.append(("local store", spec.artifact.repo))
    if spec.code is not None and spec.code.snapshot.startswith("file://"):
        found.append(("code snapshot", unquote(urlsplit(spec.code.snapshot).path)))
    return found


def check_local_paths(user: JobUser, spec: JobSpec, settings: Settings) -> None:
    """Every local path of `spec` under COLABQ_LOCAL_STORE_ROOT (see the module's docstring);
    UserInputError in one line otherwise."""
    root = settings.local_store_root
    for what, path in local_paths(spec):
        if root is None and user.authenticated:
            raise UserInputError(
                f"The {what} {path} is a folder of the worker hosts, and under Redis ACLs no "
                "folder is open to users until an operator sets COLABQ_LOCAL_STORE_ROOT: send "
                "results to the Hub (--dest hf:OWNER/NAME)."
            )
        if root is not None and not _inside(path, root):
            raise UserInputError(
                f"The {what} {path} is outside {root} (COLABQ_LOCAL_STORE_ROOT): name a folder "
                "under it, or send results to the Hub."
            )


def _inside(path: str, root: Path) -> bool:
    if not os.path.isabs(path):
        return False
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip("/") + "/")


def check_destination(user: str, spec: JobSpec, settings: Settings) -> None:
    """The gate's check: `user` (the ACL user the request came from; `default` without ACLs)
    may send `spec`'s results where it says, with a token of these hosts that serves them;
    UserInputError in one line otherwise. A host that holds no Hub token setting cannot judge
    tokens and leaves them to the worker, which checks again before allocation."""
    who = JobUser.of(user, spec.submitted_by)
    check_local_paths(who, spec, settings)
    if settings.hf_token_dir is None and settings.hf_token_file is None:
        return
    try:
        choose(who, spec, settings)
    except NoHubToken as exc:
        raise UserInputError(
            f"{exc.advice()}: no worker host can upload for {who}; ask an operator for a token."
        ) from None
