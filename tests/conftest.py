"""Shared fixtures: the real Redis (integration tests skip without it locally, fail in CI)."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest
import redis

from producer.broker import free_port
from tests.mlflow_server import (
    mlflow_uri,  # noqa: F401 (a session fixture)
    pytest_collection_modifyitems,  # noqa: F401 (its time limit)
)

TEST_REDIS_URL = os.environ.get("COLABQ_TEST_REDIS_URL")
FALLBACK_REDIS_URL = "redis://127.0.0.1:6379/14"


def make_certificate(root: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its own CA) and its key, for one day."""
    cert, key = root / "cert.pem", root / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def start_redis_server(conf: str, url: str) -> subprocess.Popen[bytes] | None:
    """A redis-server configured by `conf` (on stdin: a password on a command line is anyone's
    to read), once `url` answers; None if there is no redis-server or it never answers."""
    exe = shutil.which("redis-server")
    if exe is None:
        return None
    proc = subprocess.Popen(
        [exe, "-"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdin is not None
    proc.stdin.write(conf.encode())
    proc.stdin.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            redis.Redis.from_url(url, socket_connect_timeout=1).ping()
            return proc
        except redis.RedisError:
            time.sleep(0.05)
    proc.kill()
    return None


def _private_redis(tmp: Path) -> tuple[subprocess.Popen[bytes], str] | None:
    """A redis-server of this test process's own, behind a password, as a deployment shared by
    several machines runs it: the whole path is tested against a Redis that needs one."""
    port, password = free_port(), secrets.token_hex(16)
    # hz 100: a blocking read's timeout (the test's gate reads every 20 ms) ends within 10 ms,
    # not the default 100 ms, so a test's gate stops at once.
    conf = (f"bind 127.0.0.1\nport {port}\nsave \"\"\nappendonly no\ndir {tmp}\n"
            f"requirepass {password}\nhz 100\n")  # fmt: skip
    url = f"redis://:{password}@127.0.0.1:{port}/14"
    proc = start_redis_server(conf, url)
    return (proc, url) if proc else None


def service_missing(msg: str) -> NoReturn:
    """A service a test needs is missing: skip locally, fail in CI (`COLABQ_REQUIRE_SERVICES`)."""
    if os.environ.get("COLABQ_REQUIRE_SERVICES") or os.environ.get("CI"):
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    private = None if TEST_REDIS_URL else _private_redis(tmp_path_factory.mktemp("redis"))
    url = private[1] if private else (TEST_REDIS_URL or FALLBACK_REDIS_URL)
    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
    except redis.RedisError as exc:
        service_missing(
            f"Redis is needed ({type(exc).__name__}): start redis-server or set "
            "COLABQ_TEST_REDIS_URL"
        )
    yield url
    if private:
        private[0].kill()
        private[0].wait()


@pytest.fixture
def key_prefix() -> str:
    return f"colabq-test-{secrets.token_hex(4)}"


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def gate(redis_url: str, key_prefix: str) -> Iterator[object]:
    """The real gate (`tests.gatethread`) on this test's key prefix and the default queue prefix,
    for a test whose commands change the queue where no worker runs one."""
    from tests.gatethread import running_gate
    from worker.settings import load_settings

    settings = load_settings(redis_url=redis_url, key_prefix=key_prefix, gate_refresh_s=0.2)
    with running_gate(settings) as duty:
        yield duty
