"""What the ACL tests of the commands share: ACL users made for the test with the rules `colabq
acl` prints (unique names, deleted afterwards) on the test's key prefix and a queue prefix under
it, the test's gate on the same prefixes, and the environment a command runs with as one of
them."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from worker.people.acl import Role, rules_for

PASSWORD = "pw-" + secrets.token_hex(8)


def queue_prefix_of(key_prefix: str) -> str:
    return f"{key_prefix}:q."


@pytest.fixture
def people(redis_client: redis.Redis, redis_url: str, key_prefix: str) -> Iterator[dict[str, str]]:
    """name -> Redis URL, for alice and bob (users) and an operator, each with a unique name;
    `<who>_name` -> the name."""
    tag = secrets.token_hex(3)
    roles = {"alice": Role.USER, "bob": Role.USER, "ops": Role.OPERATOR}
    names = {who: f"{who}-{tag}" for who in roles}
    for who, role in roles.items():
        rules = rules_for(names[who], role, key_prefix, queue_prefix_of(key_prefix))
        redis_client.execute_command("ACL", "SETUSER", names[who], "on", f">{PASSWORD}", *rules)
    try:
        urls = {who: login(redis_url, names[who]) for who in roles}
        yield urls | {f"{who}_name": name for who, name in names.items()}
    finally:
        for name in names.values():
            redis_client.execute_command("ACL", "DELUSER", name)
        for key in redis_client.scan_iter(f"_kombu.binding*.{queue_prefix_of(key_prefix)}*"):
            redis_client.delete(key)


def login(redis_url: str, name: str) -> str:
    where = redis_url.split("://", 1)[1].rsplit("@", 1)[-1]  # host:port/db, without a login
    return f"redis://{name}:{PASSWORD}@{where}"


@pytest.fixture
def gate_queue_prefix(key_prefix: str) -> str:
    return queue_prefix_of(key_prefix)


@pytest.fixture
def gate_settings_extra(tmp_path: Path) -> dict[str, object]:
    """Users' local stores lie under the test's folder (under ACLs the gate opens no other)."""
    return {"local_store_root": tmp_path}


def as_user(env: dict[str, str | None], url: str, key_prefix: str) -> dict[str, str | None]:
    return {**env, "COLABQ_REDIS_URL": url, "COLABQ_QUEUE_PREFIX": queue_prefix_of(key_prefix)}
