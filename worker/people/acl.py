"""The Redis ACL rules of colabq's three roles, as `ACL SETUSER` arguments (`colabq acl`).

- **user** (a person or a machine that submits): reads every key of the deployment; writes the
  keys of its own jobs (`<prefix>:job:*.<user>`, `...:*`), its own namespace
  (`<prefix>:u:<user>:*`: idempotency keys), the shared indexes a submit or a self-cancel
  updates, and the GPU queues; publishes only Celery's task events.
- **service** (workers, beat, janitors) and **operator** (a person who may act on any job):
  every key and channel. An operator is told from a user by what Redis lets it write
  (`identity.may_write_others`), not by a list a user could edit.

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
    p = key_prefix
    own = [f"~{p}:job:*.{user}", f"~{p}:job:*.{user}:*", f"~{p}:u:{user}:*"]
    # Written by a submit or by a cancel of one's own job; see the package's docstring for
    # what a user could do to other jobs through them. The event log (`worker.records.events`)
    # too: a user may append events, true or not (the README says so).
    shared = [f"~{p}:jobs", f"~{p}:active", f"~{p}:live-destinations",
              f"~{p}:janitor:tracker-check", f"~{p}:events"]  # fmt: skip
    # kombu declares a queue (adds its bindings) before it publishes the first message to it.
    q = f"{queue_prefix}gpu.*"
    celery = [f"~{q}", f"~_kombu.binding.{q}", f"~_kombu.binding_permanent.{q}", "%R~_kombu.*"]
    return [f"%R~{p}:*", *own, *shared, *celery]


def rules_for(user: str, role: Role, key_prefix: str, queue_prefix: str) -> list[str]:
    """The `ACL SETUSER <user>` arguments for `role` (without `on` and a password)."""
    if not USER_NAME.fullmatch(user) or user == NO_ACL_USER:
        raise UserInputError(
            f"User name {user!r}: use lowercase letters, digits, '_' and '-' (at most 32, "
            "starting with a letter or digit), and not 'default' (that user means no ACLs)."
        )
    reset = ["resetkeys", "resetchannels"]
    if role is Role.USER:
        keys = user_key_patterns(user, key_prefix, queue_prefix)
        channels = ["&/*celeryev*"]
        return [*reset, *keys, *channels, *COMMANDS]
    return [*reset, "~*", "&*", *COMMANDS, *INSPECT]


def setuser_command(user: str, role: Role, key_prefix: str, queue_prefix: str) -> str:
    """One line an admin pipes into `redis-cli`."""
    return " ".join(["ACL", "SETUSER", user, *rules_for(user, role, key_prefix, queue_prefix)])
