"""`colabq acl USER [--operator|--service]`: the Redis ACL rule an admin applies for a person
or a machine (`worker.people.acl` holds the rules and why), for this deployment's key and queue
prefixes. It prints; it never connects to Redis. Pipe it into `redis-cli` as an admin:
`colabq acl alice | redis-cli -u redis://admin:PASSWORD@host`.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from producer.clictx import JsonOpt, load_settings
from worker.errors import UserInputError


def acl(
    user: Annotated[str, typer.Argument(help="The Redis ACL user name (lowercase, a-z 0-9 _ -).")],
    operator: Annotated[
        bool, typer.Option("--operator", help="A person who may act on any job and worker.")
    ] = False,
    service: Annotated[
        bool, typer.Option("--service", help="Workers, beat and janitors (every colabq key).")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Print the `ACL SETUSER` rule for USER: a user reads every job and changes only their
    own; --operator and --service may change every job. Set the password apart
    (`ACL SETUSER USER on >PASSWORD`): the rule keeps it."""
    from worker.people.acl import Role, rules_for, setuser_command

    if operator and service:
        raise UserInputError("Give one role: --operator or --service, not both.")
    role = Role.OPERATOR if operator else Role.SERVICE if service else Role.USER
    settings = load_settings()
    prefixes = (settings.key_prefix, settings.queue_prefix)
    if as_json:
        rules = rules_for(user, role, *prefixes)
        print(json.dumps({"user": user, "role": role.value, "rules": rules,
                          "command": setuser_command(user, role, *prefixes)}))  # fmt: skip
        return
    print(setuser_command(user, role, *prefixes))
