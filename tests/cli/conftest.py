"""What the `colabq` command tests share: the environment a command runs with (this test's
Redis and key prefix, a private HOME, no tracker or quiet-window variables of the developer's
shell) and a ledger on the same keys, cleaned afterwards. A module may define its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.cli.training_repo import QUIET_ENV
from worker.clock import SystemClock
from worker.records.keys import Keys
from worker.records.ledger import Ledger


@pytest.fixture
def env(redis_url: str, key_prefix: str, tmp_path: Path) -> dict[str, str | None]:
    return {
        **QUIET_ENV,
        "COLABQ_REDIS_URL": redis_url,
        "COLABQ_KEY_PREFIX": key_prefix,
        "HOME": str(tmp_path / "home"),
        "COLUMNS": "200",
    }


@pytest.fixture
def ledger(redis_client: redis.Redis, key_prefix: str) -> Iterator[Ledger]:
    yield Ledger(redis_client, SystemClock(), Keys(key_prefix), log_maxlen=1000)
    for key in redis_client.scan_iter(f"{key_prefix}:*"):
        redis_client.delete(key)
