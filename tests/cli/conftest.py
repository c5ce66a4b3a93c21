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


@pytest.fixture
def gate_queue_prefix() -> str:
    """The queue prefix of the test's gate where `env` names none (the commands' default); a
    module whose commands run with another overrides it."""
    return ""


@pytest.fixture
def gate_settings_extra() -> dict[str, object]:
    """More settings of the test's gate (as a deployment's gate host sets them); a module
    overrides it."""
    return {}


@pytest.fixture(autouse=True)
def _gate(request: pytest.FixtureRequest) -> Iterator[None]:
    """The gate (`tests.gatethread`) for a test that runs commands on its own Redis prefix
    (`env`) where no worker serves it (`fleet`'s worker runs the gate as a duty)."""
    names = request.fixturenames
    if "env" not in names or "fleet" in names or "gate" in names:
        yield
        return
    from tests.gatethread import running_gate
    from worker.settings import load_settings

    env: dict[str, str | None] = request.getfixturevalue("env")
    queue_prefix = env.get("COLABQ_QUEUE_PREFIX") or request.getfixturevalue("gate_queue_prefix")
    settings = load_settings(
        redis_url=env["COLABQ_REDIS_URL"], key_prefix=env["COLABQ_KEY_PREFIX"],
        queue_prefix=queue_prefix, gate_refresh_s=0.2,
        **request.getfixturevalue("gate_settings_extra"),
    )  # fmt: skip
    with running_gate(settings):
        yield
