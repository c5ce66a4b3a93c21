"""Finding a broker for the demo: the Redis that answers, or one started just for the demo.

Order: the configured Redis if it answers; else a `redis-server` on a free loopback port (when
the binary is installed); else fakeredis's TCP server in this process. The caller says which.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field

import redis

from worker.errors import redacted_url
from worker.records.redisconn import client as redis_client
from worker.records.sentinelurl import SentinelLogin


@dataclass
class Broker:
    url: str
    description: str
    _stop: list[object] = field(default_factory=list)

    def close(self) -> None:
        for thing in self._stop:
            if isinstance(thing, subprocess.Popen):
                thing.terminate()
                thing.wait(timeout=10)
            elif hasattr(thing, "shutdown"):
                thing.shutdown()


def answers(
    url: str,
    timeout_s: float = 1.0,
    master_name: str | None = None,
    sentinel_login: SentinelLogin | None = None,
) -> bool:
    """Whether the Redis of `url` (with Sentinel: the master of `master_name`) answers."""
    try:
        client = redis_client(url, master_name, sentinel_login, socket_connect_timeout=timeout_s)
        return bool(client.ping())
    except redis.RedisError:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_until_answers(url: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if answers(url, 0.5):
            return True
        time.sleep(0.1)
    return False


def ensure_broker(
    url: str, master_name: str | None = None, sentinel_login: SentinelLogin | None = None
) -> Broker:
    if answers(url, master_name=master_name, sentinel_login=sentinel_login):
        return Broker(url, f"using the Redis that answers at {redacted_url(url)}")
    port = free_port()
    embedded = f"redis://127.0.0.1:{port}/0"
    if binary := shutil.which("redis-server"):
        workdir = tempfile.mkdtemp(prefix="colabq-redis-")
        proc = subprocess.Popen(
            [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
             "--dir", workdir],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        if _wait_until_answers(embedded, 10):
            return Broker(
                embedded,
                f"no Redis at {redacted_url(url)}: started redis-server on port {port}",
                [proc],
            )
        proc.terminate()
    from fakeredis import TcpFakeServer

    server = TcpFakeServer(("127.0.0.1", port), server_type="redis")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _wait_until_answers(embedded, 10)
    return Broker(
        embedded,
        f"no Redis at {redacted_url(url)}: started an embedded fakeredis on port {port}",
        [server],
    )
