"""How a `code: git` job's remote is reached from a worker host and its VM: which URL is fetched
and with which of the host's read credentials.

Most users' remotes are ssh remotes (`git@HOST:OWNER/REPO.git`, `ssh://git@HOST/OWNER/REPO.git`),
and a VM has no ssh key of its own. For such a remote a worker host

1. that holds an https read credential for HOST (a line of `COLABQ_GIT_CREDENTIALS_FILE`)
   fetches `https://HOST/OWNER/REPO.git` with it instead;
2. else, holding a read-only deploy key (`COLABQ_GIT_SSH_KEY_FILE`), fetches over ssh with that
   key alone (`IdentitiesOnly`), never prompting (`BatchMode`), against the known hosts colabq
   ships for the common forges (`worker/vm/colabq_known_hosts`) and accepting a new host's key
   on first use (`StrictHostKeyChecking=accept-new`: a forge whose key is listed must match it);
3. else cannot fetch it (`NoGitRoute`).

Any other remote (https, a path) is fetched as it is, with the credential file if there is one.
The pre-allocation check (`codecheck`) and the VM (`plan`: the wrapper's `--code-remote`, the
key in the bundle) take the same route. Each worker publishes what its credentials cover in its
card (`reach_of`: host names and whether it has a key, never a secret), so that `colabq submit`
refuses an ssh remote no live worker can fetch (`can_fetch`, `no_route_advice`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import SplitResult, urlsplit

from worker.errors import ColabqError
from worker.records.fleet import WorkerCard

KNOWN_HOSTS = Path(__file__).resolve().parents[1] / "vm" / "colabq_known_hosts"
CREDENTIALS_VARIABLE = "COLABQ_GIT_CREDENTIALS_FILE"
SSH_KEY_VARIABLE = "COLABQ_GIT_SSH_KEY_FILE"
_SCP_LIKE = re.compile(r"^(?:[\w.-]+@)?(?P<host>[\w.-]+):(?P<path>.+)$")
_HOST = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$")


class NoGitRoute(ColabqError):
    """This host holds neither an https credential for an ssh remote's host nor a deploy key."""


@dataclass(frozen=True)
class SshRemote:
    host: str  # lowercased
    path: str  # on the server, without a leading '/'

    @property
    def https_url(self) -> str | None:
        """`https://HOST/PATH`; None for a path under the ssh user's home (`~`), which only
        ssh can name."""
        return None if self.path.startswith("~") else f"https://{self.host}/{self.path}"


def ssh_remote(remote: str) -> SshRemote | None:
    """The host and path of an ssh remote (`ssh://[USER@]HOST[:PORT]/PATH`, scp-like
    `[USER@]HOST:PATH`), or None for any other remote."""
    if "://" in remote:
        try:
            parts = urlsplit(remote)
        except ValueError:
            return None
        if parts.scheme != "ssh" or not parts.hostname:
            return None
        return SshRemote(parts.hostname.lower(), parts.path.lstrip("/"))
    m = _SCP_LIKE.fullmatch(remote)
    if m is None or remote.startswith("/") or "/" in m["host"]:
        return None
    return SshRemote(m["host"].lower(), m["path"].lstrip("/"))


def credential_urls(path: Path | None) -> list[SplitResult]:
    """The lines of a git-credential-store file as URLs (those that are); none if there is no
    file or it cannot be read (the worker's start-up check names why)."""
    if path is None:
        return []
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    urls = []
    for line in lines:
        try:
            urls.append(urlsplit(line.strip()))
        except ValueError:
            continue
    return urls


def credential_hosts(path: Path | None) -> tuple[str, ...]:
    """The hosts the https lines of a git-credential-store file are for (never a secret)."""
    hosts = {
        u.hostname.lower()
        for u in credential_urls(path)
        if u.scheme == "https" and u.hostname and _HOST.fullmatch(u.hostname)
    }
    return tuple(sorted(hosts))


@dataclass(frozen=True)
class Reach:
    """What a worker host's git credentials reach: the hosts of its https credentials, and
    whether it holds a deploy key. Published on its card; names only."""

    hosts: tuple[str, ...] = ()
    ssh_key: bool = False


def reach_of(credentials: Path | None, ssh_key: Path | None) -> Reach:
    return Reach(credential_hosts(credentials), ssh_key is not None)


def can_fetch(reach: Reach, remote: str) -> bool:
    """Whether a host with `reach` can fetch `remote` from a VM (anything but an ssh remote:
    as before, the remote's own access decides)."""
    ssh = ssh_remote(remote)
    if ssh is None:
        return True
    return reach.ssh_key or (ssh.https_url is not None and ssh.host in reach.hosts)


def fetchers(cards: Iterable[WorkerCard], queues: Iterable[str], remote: str) -> list[str]:
    """The live workers (by name) serving any of `queues` that can fetch `remote`."""
    wanted = set(queues)
    return [
        c.name
        for c in cards
        if wanted & set(c.queues) and can_fetch(Reach(c.git_hosts, c.git_ssh_key), remote)
    ]


def no_route_advice(remote: str) -> str:
    """What to do about an ssh remote that cannot be fetched: both ways, and a snapshot."""
    ssh = ssh_remote(remote)
    host = ssh.host if ssh is not None else "its host"
    return (
        f"give worker hosts a read credential for {host} in {CREDENTIALS_VARIABLE} (the VM "
        f"then fetches over https) or a read-only deploy key in {SSH_KEY_VARIABLE}, or ship the "
        "code with code: snapshot"
    )


@dataclass(frozen=True)
class GitRoute:
    """What this host (and the VM it allocates) fetches, and with what."""

    url: str
    credentials: Path | None = None
    ssh_key: Path | None = None

    def describe(self, remote: str) -> str:
        """For the job's log: how the remote is reached (paths and hosts, never a secret)."""
        if self.ssh_key is not None:
            return f"{remote} over ssh with this host's deploy key"
        if self.url != remote:
            return f"{remote} over https ({self.url}) with this host's credential"
        return remote


def route(remote: str, credentials: Path | None, ssh_key: Path | None) -> GitRoute:
    """How this host fetches `remote` (see the module's docstring); NoGitRoute for an ssh
    remote it has no way to fetch."""
    ssh = ssh_remote(remote)
    if ssh is None:
        return GitRoute(remote, credentials)
    if ssh.https_url is not None and ssh.host in credential_hosts(credentials):
        return GitRoute(ssh.https_url, credentials)
    if ssh_key is not None:
        return GitRoute(remote, None, ssh_key)
    raise NoGitRoute(
        f"{remote} is an ssh remote and this worker host has no way to fetch it on a VM: "
        f"{no_route_advice(remote)}"
    )


def ssh_command(key: Path, known_hosts: Path, *, connect_timeout_s: int = 20) -> str:
    """GIT_SSH_COMMAND for a fetch with the deploy key alone: the key's path, never its text."""
    return shlex.join([
        "ssh", "-i", str(key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
        "-o", f"ConnectTimeout={connect_timeout_s}", "-o", "StrictHostKeyChecking=accept-new",
        "-o", f"UserKnownHostsFile={known_hosts}",
    ])  # fmt: skip
