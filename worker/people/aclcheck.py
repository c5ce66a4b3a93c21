"""`colabq acl --check`: each colabq user's live ACL rule, as Redis answers for it (`ACL DRYRUN`),
compared with what its role's rule must answer (`surface.probes`), one line per difference.

Who is checked: every user `ACL USERS` lists but `default` (no ACLs), names colabq cannot use,
admins (a user that may run `ACL SETUSER` is the deployment's admin, not colabq's) and users that
cannot read the deployment (another application's). A user's role is what Redis lets it do: an
operator or a service writes outside its namespace (`identity.may_write_others`' probe key), a
user reads the job index. Asking needs `+acl|users` and `+acl|dryrun`, which the operator's and
the service's rules grant; not `ACL GETUSER`, which shows password hashes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from worker.errors import UserInputError
from worker.people.acl import Role, operator_probe_key
from worker.people.identity import NO_ACL_USER, USER_NAME
from worker.people.surface import Probe, probes, surface
from worker.records.keys import Keys

# The other user a user's rule is checked against (their requests stream must be refused).
OTHER = "someone-else"


@dataclass(frozen=True)
class UserCheck:
    user: str
    role: Role
    differences: tuple[str, ...]


@dataclass(frozen=True)
class CheckReport:
    checked: tuple[UserCheck, ...]
    left_out: tuple[str, ...]  # admins and users that are not colabq's

    @property
    def differences(self) -> list[str]:
        return [line for u in self.checked for line in u.differences]


def allowed(reply: Any) -> bool:
    return reply in (b"OK", "OK")


def check_rules(client: Any, keys: Keys, queue_prefix: str) -> CheckReport:
    """Every colabq user's differences from its role's rule."""
    try:
        names = sorted(_text(n) for n in client.execute_command("ACL", "USERS"))
    except redis.exceptions.NoPermissionError:
        raise UserInputError(
            "colabq acl --check lists the users and asks Redis what each may do: use an "
            "operator's Redis user (`colabq acl NAME --operator`: ACL USERS and ACL DRYRUN)."
        ) from None
    checked, left_out = [], []
    for name in names:
        if name == NO_ACL_USER or not USER_NAME.fullmatch(name):
            continue
        role = role_of(client, name, keys)
        if role is None:
            left_out.append(name)
            continue
        ps = probes(role, surface(keys, queue_prefix, name, OTHER))
        checked.append(UserCheck(name, role, tuple(_differences(client, name, role, ps))))
    return CheckReport(tuple(checked), tuple(left_out))


def role_of(client: Any, user: str, keys: Keys) -> Role | None:
    """The role `user`'s live rule is closest to; None for an admin or a stranger."""
    pipe = client.pipeline(transaction=False)
    for argv in (("ACL", "SETUSER", "x"), ("UNLINK", operator_probe_key(keys.prefix)),
                 ("GET", keys.jobs())):  # fmt: skip
        pipe.execute_command("ACL", "DRYRUN", user, *argv)
    admin, operator, reader = (allowed(r) for r in pipe.execute(raise_on_error=False))
    if admin:
        return None
    return Role.OPERATOR if operator else Role.USER if reader else None


def _differences(client: Any, user: str, role: Role, ps: Sequence[Probe]) -> list[str]:
    pipe = client.pipeline(transaction=False)
    for p in ps:
        pipe.execute_command("ACL", "DRYRUN", user, *p.argv)
    wrong: dict[tuple[str, bool], list[str]] = {}
    for p, reply in zip(ps, pipe.execute(raise_on_error=False), strict=True):
        if allowed(reply) != p.allowed:
            wrong.setdefault((p.what, p.allowed), []).append(p.argv[0])
    flag = "" if role is Role.USER else " --operator (or --service)"
    lines = []
    for (what, should), commands in wrong.items():
        did, must = ("refuses", "allow") if should else ("allows", "refuse")
        lines.append(
            f"{user} ({role.value}): Redis {did} {', '.join(dict.fromkeys(commands))} on "
            f"{what!r}, which the rule must {must}: apply `colabq acl {user}{flag}` again."
        )
    return lines


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
