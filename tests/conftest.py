"""Shared fixtures: the real Redis (integration tests skip without it locally, fail in CI)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest
import redis

TEST_REDIS_URL = os.environ.get("COLABQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/14")


@pytest.fixture(scope="session")
def redis_url() -> str:
    try:
        redis.Redis.from_url(TEST_REDIS_URL, socket_connect_timeout=1).ping()
    except redis.RedisError as exc:
        msg = f"Redis at {TEST_REDIS_URL} is needed: {exc}"
        if os.environ.get("COLABQ_REQUIRE_SERVICES") or os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return TEST_REDIS_URL


@pytest.fixture
def key_prefix() -> str:
    return f"colabq-test-{secrets.token_hex(4)}"


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()
