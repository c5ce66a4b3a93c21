"""What the ACL tests of a fleet share: the worker (and its gate duty) logged in as a service
user, ACL users made on the fleet's prefixes with the rules `colabq acl` prints, each deleted
after the test, and their logins."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.integration.conftest import Fleet
from worker.people.acl import Role, rules_for

PASSWORD = "pw-" + secrets.token_hex(8)
TAG = secrets.token_hex(3)
SERVICE = f"workers-{TAG}"


def login(redis_url: str, user: str) -> str:
    where = redis_url.split("://", 1)[1].rsplit("@", 1)[-1]  # host:port/db, without a login
    return f"redis://{user}:{PASSWORD}@{where}"


@pytest.fixture
def users(redis_url: str) -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    admin = redis.Redis.from_url(redis_url)
    for name in made:
        admin.execute_command("ACL", "DELUSER", name)


@pytest.fixture
def fleet_env_extra(redis_url: str, users: list[str], tmp_path: Path) -> dict[str, str]:
    """The worker logs in as a service user (its rule does not depend on the prefixes); its
    gate reads the list of users often, as the users are made after it started; its users'
    local stores lie under the test's folder (under ACLs no other folder is open)."""
    rules = rules_for(SERVICE, Role.SERVICE, "any", "")
    redis.Redis.from_url(redis_url).execute_command(
        "ACL", "SETUSER", SERVICE, "on", f">{PASSWORD}", *rules
    )
    users.append(SERVICE)
    return {"COLABQ_REDIS_URL": login(redis_url, SERVICE), "COLABQ_GATE_REFRESH_S": "0.5",
            "COLABQ_LOCAL_STORE_ROOT": str(tmp_path)}  # fmt: skip


def make_user(fleet: Fleet, users: list[str], who: str) -> str:
    """A user `who-<tag>` with the user rule on the fleet's prefixes."""
    name = f"{who}-{TAG}"
    rules = rules_for(name, Role.USER, fleet.ledger.keys.prefix, fleet.env["COLABQ_QUEUE_PREFIX"])
    fleet.ledger.r.execute_command("ACL", "SETUSER", name, "on", f">{PASSWORD}", *rules)
    users.append(name)
    return name
