"""A Redis Sentinel deployment on loopback for one test: a master, one replica and three
sentinels (`redis-server --sentinel`, quorum 2), each in its own folder on a free port.
`start()` returns once every sentinel sees the master, the replica and the two other sentinels
(polled, never slept on).

With a `Security`, it is what a deployment across machines runs: the data nodes need a password
(`requirepass`, and optionally an ACL user for colabq), the sentinels their own, different one
(`requirepass`, and optionally an ACL user of theirs), the sentinels log in to the master with
`sentinel auth-pass` (and `auth-user`), and TLS on every port when it names a certificate. Every
process reads its configuration from a 0600 file, never a password from its command line."""

from __future__ import annotations

import contextlib
import secrets
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.conftest import make_certificate

MASTER_NAME = "colabq-it"
QUORUM = 2
# The permissions Redis's documentation gives the sentinels' user on the master.
SENTINEL_ON_MASTER = (
    "allchannels +multi +slaveof +ping +exec +subscribe +config|rewrite +role +publish +info "
    "+client|setname +client|kill +script|kill"
)


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


@dataclass(frozen=True)
class Security:
    """Who logs in where, and TLS. Passwords differ per side: a test can tell them apart."""

    master_password: str  # the data nodes' requirepass (their default user; also masterauth)
    sentinel_password: str  # the sentinels' requirepass
    colabq_user: str | None = None  # an ACL user on the data nodes that colabq logs in as
    colabq_password: str = ""
    watcher_user: str | None = None  # an ACL user on the sentinels that colabq logs in as
    watcher_password: str = ""
    tls: tuple[Path, Path] | None = None  # certificate (its own CA) and key

    def master_login(self) -> tuple[str | None, str]:
        """colabq's login on the data nodes."""
        if self.colabq_user:
            return self.colabq_user, self.colabq_password
        return None, self.master_password

    def sentinel_login(self) -> tuple[str | None, str]:
        """colabq's login on the sentinels."""
        if self.watcher_user:
            return self.watcher_user, self.watcher_password
        return None, self.sentinel_password

    def env(self) -> dict[str, str]:
        """colabq's settings for the sentinels' login (the master's is in the URL)."""
        user, password = self.sentinel_login()
        return {"COLABQ_REDIS_SENTINEL_USERNAME": user or "",
                "COLABQ_REDIS_SENTINEL_PASSWORD": password}  # fmt: skip

    def tls_conf(self) -> str:
        if self.tls is None:
            return ""
        cert, key = self.tls
        return (f"tls-cert-file {cert}\ntls-key-file {key}\ntls-ca-cert-file {cert}\n"
                "tls-auth-clients no\ntls-replication yes\n")  # fmt: skip

    def client_tls(self) -> dict[str, Any]:
        if self.tls is None:
            return {}
        return {"ssl": True, "ssl_ca_certs": str(self.tls[0]), "ssl_cert_reqs": "required"}


def full_security(root: Path) -> Security:
    """Every part at once: ACL users on both sides, their passwords all different, and TLS."""
    pw = [secrets.token_hex(12) for _ in range(4)]
    return Security(pw[0], pw[1], "colabq", pw[2], "watcher", pw[3], make_certificate(root))


class SentinelCluster:
    def __init__(
        self, root: Path, *, down_after_ms: int = 1000, security: Security | None = None
    ) -> None:
        self.root = root
        self.down_after_ms = down_after_ms
        self.security = security
        self.data_ports = [free_port(), free_port()]  # the first starts as the master
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def url(self) -> str:
        """kombu's form; the database (and TLS) written once, on the last part, and the
        master's login on the first."""
        parts = [f"sentinel://127.0.0.1:{p}" for p in self.sentinel_ports]
        sec = self.security
        if sec is not None:
            user, password = sec.master_login()
            parts[0] = f"sentinel://{user or ''}:{password}@127.0.0.1:{self.sentinel_ports[0]}"
        query = f"?ssl_cert_reqs=required&ssl_ca_certs={sec.tls[0]}" if sec and sec.tls else ""
        return ";".join(parts) + "/0" + query

    def env(self) -> dict[str, str]:
        """colabq's settings, beside the URL, for this deployment."""
        extra = self.security.env() if self.security else {}
        return {"COLABQ_REDIS_MASTER_NAME": MASTER_NAME, **extra}

    def data(self, port: int) -> redis.Redis:
        """An admin's client of one data node, that never retries (a test's probe)."""
        sec = self.security
        login = {"password": sec.master_password, **sec.client_tls()} if sec else {}
        return redis.Redis(
            "127.0.0.1", port, socket_connect_timeout=1, socket_timeout=2,
            retry=Retry(NoBackoff(), 0), **login,
        )  # fmt: skip

    def sentinel(self, port: int) -> redis.Redis:
        """An admin's client of one sentinel, that never retries."""
        sec = self.security
        login = {"password": sec.sentinel_password, **sec.client_tls()} if sec else {}
        return redis.Redis(
            "127.0.0.1", port, socket_connect_timeout=1, socket_timeout=2,
            retry=Retry(NoBackoff(), 0), decode_responses=True, **login,
        )  # fmt: skip

    def _spawn(self, port: int, conf: str, *extra: str) -> None:
        folder = self.root / str(port)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "redis.conf"
        path.touch(mode=0o600)
        path.write_text(conf)
        with open(folder / "log", "ab") as log:
            self.procs[port] = subprocess.Popen(
                ["redis-server", str(path), *extra], cwd=folder, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    def _listen(self, port: int) -> str:
        sec = self.security
        if sec is not None and sec.tls is not None:
            return f"port 0\ntls-port {port}\nbind 127.0.0.1\n{sec.tls_conf()}"
        return f"port {port}\nbind 127.0.0.1\n"

    def _data(self, port: int, replica_of: int | None = None) -> None:
        conf = (f"{self._listen(port)}dir {self.root / str(port)}\nsave \"\"\nappendonly no\n"
                "repl-diskless-sync-delay 0\n")  # fmt: skip
        if replica_of is not None:
            conf += f"replicaof 127.0.0.1 {replica_of}\n"
        sec = self.security
        if sec is not None:  # each data node may become the master: all have every login
            conf += f"requirepass {sec.master_password}\nmasterauth {sec.master_password}\n"
            if sec.colabq_user:
                conf += f"user {sec.colabq_user} on >{sec.colabq_password} ~* &* +@all\n"
            conf += f"user sentinel-user on >{sec.master_password} {SENTINEL_ON_MASTER}\n"
        self._spawn(port, conf)

    def _sentinel_conf(self, port: int, master: int) -> str:
        conf = (
            f"{self._listen(port)}dir {self.root / str(port)}\n"
            f"sentinel monitor {MASTER_NAME} 127.0.0.1 {master} {QUORUM}\n"
            f"sentinel down-after-milliseconds {MASTER_NAME} {self.down_after_ms}\n"
            f"sentinel failover-timeout {MASTER_NAME} 10000\n"
        )
        sec = self.security
        if sec is not None:
            conf += (
                f"sentinel auth-user {MASTER_NAME} sentinel-user\n"
                f"sentinel auth-pass {MASTER_NAME} {sec.master_password}\n"
                f"requirepass {sec.sentinel_password}\n"
                f"sentinel sentinel-pass {sec.sentinel_password}\n"
            )
            if sec.watcher_user:
                conf += f"user {sec.watcher_user} on >{sec.watcher_password} ~* &* +@all\n"
        return conf

    def start(self) -> None:
        master, replica = self.data_ports
        self._data(master)
        wait_until(lambda: self.data(master).ping(), "the master answers")
        self._data(replica, replica_of=master)
        wait_until(lambda: self.link_up(replica), "the replica in sync")
        for port in self.sentinel_ports:
            self._spawn(port, self._sentinel_conf(port, master), "--sentinel")
        wait_until(
            lambda: self.ready(master), "three sentinels that see the master and replica", 60
        )

    def link_up(self, replica: int) -> bool:
        info: dict[str, Any] = self.data(replica).info("replication")
        return info.get("master_link_status") == "up"

    def ready(self, master: int) -> bool:
        """Every sentinel names `master`, sees a replica up and the two other sentinels."""
        for port in self.sentinel_ports:
            s: Any = self.sentinel(port)
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
                s: Any = self.sentinel(port)
                return int(s.sentinel_get_master_addr_by_name(MASTER_NAME)[1])
        raise AssertionError("no sentinel answers")

    def role(self, port: int) -> str:
        return str(self.data(port).info("replication")["role"])

    def switchover(self) -> int:
        """A planned failover that loses no write (README, "Redis Sentinel"): the master's
        writes paused, its replica caught up, SENTINEL FAILOVER, the old master made the new
        one's replica as soon as the sentinels name the new one, then its paused writes let go
        (each refused READONLY, which clients retry on the new master). Returns the new port."""
        old = self.master_port()
        (replica,) = [p for p in self.data_ports if p != old]
        m: Any = self.data(old)
        m.execute_command("CLIENT", "PAUSE", 60_000, "WRITE")
        try:
            target = int(m.info("replication")["master_repl_offset"])
            wait_until(
                lambda: int(self.data(replica).info("replication")["slave_repl_offset"])
                >= target, "the replica caught up", 10,
            )  # fmt: skip
            sentinel: Any = self.sentinel(self.sentinel_ports[0])
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
