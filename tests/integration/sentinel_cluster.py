"""A Redis Sentinel deployment on loopback for one test: a master, one replica (`--replicaof`)
and three sentinels (`redis-server --sentinel`, quorum 2), each in its own folder on a free port.
`start()` returns once every sentinel sees the master, the replica and the two other sentinels
(polled, never slept on)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

MASTER_NAME = "colabq-it"
QUORUM = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(cond: Callable[[], object], what: str, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(redis.RedisError):
            if cond():
                return
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def direct(port: int) -> redis.Redis:
    """A client of one process, that never retries (a test's probe)."""
    return redis.Redis(
        "127.0.0.1", port, socket_connect_timeout=1, socket_timeout=2, retry=Retry(NoBackoff(), 0)
    )


class SentinelCluster:
    def __init__(self, root: Path, *, down_after_ms: int = 1000) -> None:
        self.root = root
        self.down_after_ms = down_after_ms
        self.data_ports = [free_port(), free_port()]  # the first starts as the master
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def url(self) -> str:
        """kombu's form; the database is written once, on the last part."""
        parts = [f"sentinel://127.0.0.1:{p}" for p in self.sentinel_ports]
        return ";".join(parts) + "/0"

    def _spawn(self, port: int, argv: list[str]) -> None:
        folder = self.root / str(port)
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "log", "ab") as log:
            self.procs[port] = subprocess.Popen(
                argv, cwd=folder, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def _data(self, port: int, *extra: str) -> None:
        self._spawn(port, ["redis-server", "--bind", "127.0.0.1", "--port", str(port),
                           "--dir", str(self.root / str(port)), "--save", "",
                           "--appendonly", "no", "--repl-diskless-sync-delay", "0",
                           *extra])  # fmt: skip

    def start(self) -> None:
        master, replica = self.data_ports
        self._data(master)
        wait_until(lambda: direct(master).ping(), "the master answers")
        self._data(replica, "--replicaof", "127.0.0.1", str(master))
        wait_until(lambda: self.link_up(replica), "the replica in sync")
        for port in self.sentinel_ports:
            conf = self.root / str(port) / "sentinel.conf"
            conf.parent.mkdir(parents=True, exist_ok=True)
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {conf.parent}\n"
                f"sentinel monitor {MASTER_NAME} 127.0.0.1 {master} {QUORUM}\n"
                f"sentinel down-after-milliseconds {MASTER_NAME} {self.down_after_ms}\n"
                f"sentinel failover-timeout {MASTER_NAME} 10000\n"
            )
            self._spawn(port, ["redis-server", str(conf), "--sentinel"])
        wait_until(lambda: self.ready(master), "three sentinels that see the master and replica")

    def link_up(self, replica: int) -> bool:
        info: dict[str, Any] = direct(replica).info("replication")
        return info.get("master_link_status") == "up"

    def ready(self, master: int) -> bool:
        """Every sentinel names `master`, sees a replica up and the two other sentinels."""
        for port in self.sentinel_ports:
            s: Any = direct(port)
            state = s.sentinel_master(MASTER_NAME)
            if int(state["port"]) != master or int(state["num-other-sentinels"]) != 2:
                return False
            replicas = s.sentinel_slaves(MASTER_NAME)
            if not any(r["is_slave"] and not r["is_sdown"] and
                       r.get("master-link-status") == "ok" for r in replicas):  # fmt: skip
                return False
        return True

    def master_port(self) -> int:
        """The master as the first sentinel that answers names it."""
        for port in self.sentinel_ports:
            with contextlib.suppress(redis.RedisError):
                s: Any = direct(port)
                return int(s.sentinel_get_master_addr_by_name(MASTER_NAME)[1])
        raise AssertionError("no sentinel answers")

    def role(self, port: int) -> str:
        return str(direct(port).info("replication")["role"])

    def switchover(self) -> int:
        """A planned failover that loses no write (README, "Redis Sentinel"): the master's
        writes paused, its replica caught up, SENTINEL FAILOVER, the old master made the new
        one's replica as soon as the sentinels name the new one, then its paused writes let go
        (each refused READONLY, which clients retry on the new master). Returns the new port."""
        old = self.master_port()
        (replica,) = [p for p in self.data_ports if p != old]
        m: Any = direct(old)
        m.execute_command("CLIENT", "PAUSE", 60_000, "WRITE")
        try:
            target = int(m.info("replication")["master_repl_offset"])
            wait_until(
                lambda: int(direct(replica).info("replication")["slave_repl_offset"]) >= target,
                "the replica caught up", 10,
            )  # fmt: skip
            sentinel: Any = direct(self.sentinel_ports[0])
            sentinel.execute_command("SENTINEL", "FAILOVER", MASTER_NAME)
            wait_until(lambda: self.master_port() == replica, "the sentinels name the new master")
            m.execute_command("REPLICAOF", "127.0.0.1", replica)
        finally:
            m.execute_command("CLIENT", "UNPAUSE")
        return replica

    def kill(self, port: int) -> None:
        proc = self.procs[port]
        proc.kill()
        proc.wait()

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def __enter__(self) -> SentinelCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
