"""The Redis ACL rules of colabq's three roles, as `ACL SETUSER` arguments (`colabq acl`).

- **user** (a person or a machine that submits): reads every key of the deployment and the GPU
  queues; writes only their own namespace, `<prefix>:u:<user>:*`: their requests to the gate
  and its replies (`worker.gate`); no Pub/Sub channel. Every change they make (submit, cancel,
  retry...) is the gate's to carry out: no job record, index, queue, kombu binding, event stream
  or Celery event channel is theirs to write.
- **service** (workers, beat, janitors, gates) and **operator** (a person who may act on any
  job): every key and channel, and the ACL inspection the gate and `colabq acl --check` need.
  An operator is told from a user by what Redis lets it write (`identity.may_write_others`,
  and the gate's `ACL DRYRUN` of the same write), not by a list a user could edit.

Every role loses the administrative and dangerous commands (FLUSHALL, KEYS, CONFIG, ACL but
WHOAMI; INFO stays, for `colabq doctor`) and Redis functions. Rules never hold a password: the
admin sets it apart (`ACL SETUSER NAME on >PASSWORD`), so applying the rules again keeps it.
"""

from __future__ import annotations

from enum import StrEnum

from worker.errors import UserInputError
from worker.people.identity import NO_ACL_USER, USER_NAME


class Role(StrEnum):
    USER = "user"
    OPERATOR = "operator"
    SERVICE = "service"


# What every role may run; the key and channel patterns are what tell the roles apart.
COMMANDS = ("+@all", "-@admin", "-@dangerous", "-function", "+acl|whoami", "+info")
# Services and operators also list the users and ask what Redis would let one do: the gate finds
# every user's requests stream and tells an operator's request from a user's (`worker.gate`),
# and an operator's `colabq acl --check` compares the rules. Not ACL GETUSER: it shows every
# user's password hash.
INSPECT = ("+acl|users", "+acl|dryrun")


def operator_probe_key(key_prefix: str) -> str:
    """A key no job uses, which only operators and services may write (`may_write_others`)."""
    return f"{key_prefix}:people:operator-probe"


def user_key_patterns(user: str, key_prefix: str, queue_prefix: str) -> list[str]:
    """A user reads the deployment (its keys; the GPU queues, for their depth) and writes only
    their own namespace: their requests stream and the gate's replies (`worker.gate`)."""
    p = key_prefix
    return [f"%R~{p}:*", f"%R~{queue_prefix}gpu.*", f"~{p}:u:{user}:*"]


def rules_for(user: str, role: Role, key_prefix: str, queue_prefix: str) -> list[str]:
    """The `ACL SETUSER <user>` arguments for `role` (without `on` and a password)."""
    if not USER_NAME.fullmatch(user) or user == NO_ACL_USER:
        raise UserInputError(
            f"User name {user!r}: use lowercase letters, digits, '_' and '-' (at most 32, "
            "starting with a letter or digit), and not 'default' (that user means no ACLs)."
        )
    reset = ["resetkeys", "resetchannels"]
    if role is Role.USER:  # no channel at all: resetchannels alone
        return [*reset, *user_key_patterns(user, key_prefix, queue_prefix), *COMMANDS]
    return [*reset, "~*", "&*", *COMMANDS, *INSPECT]


def setuser_command(user: str, role: Role, key_prefix: str, queue_prefix: str) -> str:
    """One line an admin pipes into `redis-cli`."""
    return " ".join(["ACL", "SETUSER", user, *rules_for(user, role, key_prefix, queue_prefix)])
