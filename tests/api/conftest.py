"""What the Python API's tests share: a `Client` on this test's private key and queue prefixes
of the real Redis (cleaned afterwards), in a working folder and environment of its own (no .env,
no tracker or quiet-window variables of the developer's shell), and the training repository of
the CLI's tests; the integration tests' `fleet` (a worker on the emulator)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from colabq import Client
from tests.cli.training_repo import QUIET_ENV
from tests.integration.conftest import fleet, fleet_env_extra  # noqa: F401 (the worker's fixtures)
from worker.settings import Settings, load_settings


@pytest.fixture
def settings(
    redis_url: str, key_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    for name in QUIET_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return load_settings(redis_url=redis_url, key_prefix=key_prefix, queue_prefix=f"{key_prefix}.")


@pytest.fixture
def client(settings: Settings, redis_client: redis.Redis, key_prefix: str) -> Iterator[Client]:
    with Client(settings=settings) as c:
        yield c
    for pattern in (f"{key_prefix}*", f"_kombu.binding.{key_prefix}*"):
        for key in redis_client.scan_iter(pattern):
            redis_client.delete(key)


@pytest.fixture(autouse=True)
def _gate(request: pytest.FixtureRequest) -> Iterator[None]:
    """The gate (`tests.gatethread`) for a test on its own `settings`, where no worker serves
    them (`fleet`'s worker runs the gate as a duty)."""
    names = request.fixturenames
    if "settings" not in names or "fleet" in names:
        yield
        return
    from tests.gatethread import running_gate

    settings: Settings = request.getfixturevalue("settings")
    with running_gate(settings.model_copy(update={"gate_refresh_s": 0.2})):
        yield
