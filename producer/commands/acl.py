"""`colabq acl USER [--operator|--service]`: the Redis ACL rule an admin applies for a person
or a machine (`worker.people.acl` holds the rules and why), for this deployment's key and queue
prefixes. It prints; it never connects to Redis. Pipe it into `redis-cli` as an admin:
`colabq acl alice | redis-cli -u redis://admin:PASSWORD@host`.

`colabq acl --check` (an operator) connects and compares each colabq user's live rule with what
its role's must allow and refuse (`worker.people.aclcheck`): one line per difference, exit 1 if
any.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from producer.clictx import JsonOpt, _connect, load_settings, out
from worker.errors import UserInputError


def acl(
    user: Annotated[
        str | None,
        typer.Argument(
            help="The Redis ACL user name (lowercase, a-z 0-9 _ -).", show_default=False
        ),
    ] = None,
    operator: Annotated[
        bool, typer.Option("--operator", help="A person who may act on any job and worker.")
    ] = False,
    service: Annotated[
        bool, typer.Option("--service", help="Workers, beat, gates and janitors (every key).")
    ] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check", help="Compare every colabq user's live rule with its role's (an operator)."
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Print the `ACL SETUSER` rule for USER: a user reads every job and writes only the
    gate's requests of their own; --operator and --service may change every job. Set the
    password apart (`ACL SETUSER USER on >PASSWORD`): the rule keeps it. --check compares the
    live rules."""
    from worker.people.acl import Role, rules_for, setuser_command

    if check:
        if user is not None or operator or service:
            raise UserInputError("--check looks at every user: drop USER, --operator, --service.")
        _check(as_json=as_json)
        return
    if user is None:
        raise UserInputError("Name the user: `colabq acl alice` (or check them: --check).")
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


def _check(*, as_json: bool) -> None:
    from worker.people.aclcheck import check_rules

    settings = load_settings()
    ledger = _connect(settings)
    report = check_rules(ledger.r, ledger.keys, settings.queue_prefix)
    lines = report.differences
    if as_json:
        users = [{"user": u.user, "role": u.role.value, "differences": list(u.differences)}
                 for u in report.checked]  # fmt: skip
        print(json.dumps({"users": users, "left_out": list(report.left_out),
                          "differences": len(lines)}))  # fmt: skip
    else:
        for line in lines:
            out.print(line, markup=False, soft_wrap=True)
        who = ", ".join(f"{u.user} ({u.role.value})" for u in report.checked) or "nobody"
        left = f"; left out (admins, other applications): {', '.join(report.left_out)}"
        out.print(f"{len(lines)} difference(s); checked {who}"
                  f"{left if report.left_out else ''}.", markup=False)  # fmt: skip
    if lines:
        raise typer.Exit(1)
