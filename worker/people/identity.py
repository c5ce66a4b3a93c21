"""Who this process is on Redis (`ACL WHOAMI`), and whether Redis lets it change other
people's jobs. Never an environment variable: the only name trusted is the one Redis
authenticated. See the package's docstring for the design.
"""

from __future__ import annotations

import getpass
import os
import socket
from dataclasses import dataclass
from typing import Any

import redis

from worker.errors import ConfigError
from worker.records import ids

# The user Redis runs every connection as when no ACL user is named: no ACLs.
NO_ACL_USER = "default"
# A colabq user name: it ends job ids (`<hex>.<user>`), so no '.', and it is safe in key names.
USER_NAME = ids.USER


def os_user() -> str:
    """This machine's user name (what a job recorded as its submitter before ACLs)."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return str(os.getuid())


@dataclass(frozen=True)
class Identity:
    """`user` is the Redis ACL user (`default` without ACLs); `host` this machine's name."""

    user: str
    host: str
    local_user: str

    @property
    def acl(self) -> bool:
        return self.user != NO_ACL_USER

    @property
    def actor(self) -> str:
        """Who a history entry names: the ACL user, else this machine's user."""
        return self.user if self.acl else self.local_user

    @property
    def owner(self) -> str | None:
        """The namespace of the jobs this identity submits (None: no ACLs, plain ids)."""
        return self.user if self.acl else None

    @property
    def submitter(self) -> str:
        """A job's `submitted_by`: the ACL user, else user@host as before."""
        return self.user if self.acl else f"{self.local_user}@{self.host}"


def whoami(client: Any) -> str:
    """`ACL WHOAMI`; `default` on a server (or a fake) without the command."""
    try:
        raw = client.execute_command("ACL", "WHOAMI")
    except redis.exceptions.NoPermissionError:
        raise ConfigError(
            "This Redis user may not run ACL WHOAMI: have an admin apply `colabq acl USER`."
        ) from None
    except redis.ResponseError:
        return NO_ACL_USER
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def identify(client: Any) -> Identity:
    """This process's identity on `client`'s Redis; a user name colabq cannot use as a job
    namespace is refused in one line."""
    user = whoami(client)
    if user != NO_ACL_USER and not USER_NAME.fullmatch(user):
        raise ConfigError(
            f"Redis user {user!r} cannot own colabq jobs: use a name of lowercase letters, "
            "digits, '_' and '-' (at most 32), starting with a letter or digit."
        )
    return Identity(user, socket.gethostname(), os_user())


def may_user_write_others(client: Any, user: str, probe_key: str) -> bool:
    """Whether Redis would let `user` write outside their own namespace (an operator or a
    service): `ACL DRYRUN` of the write `may_write_others` tries, asked by a service (the gate)
    for the user whose request it carries out. False when this client may not ask."""
    try:
        reply = client.execute_command("ACL", "DRYRUN", user, "UNLINK", probe_key)
    except redis.ResponseError:  # NOPERM for this client, or no such user
        return False
    return reply in (b"OK", "OK")


def may_write_others(client: Any, probe_key: str) -> bool:
    """Whether Redis lets this user write outside its own jobs (an operator or a service): a
    write command on `probe_key`, a key no job uses and only they may write, that changes
    nothing (UNLINK of a key that never exists)."""
    try:
        client.unlink(probe_key)
    except redis.exceptions.NoPermissionError:
        return False
    return True
