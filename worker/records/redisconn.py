"""The one way colabq builds a Redis client from `COLABQ_REDIS_URL` (and, with Sentinel,
`COLABQ_REDIS_MASTER_NAME` and the sentinels' own login): the worker, the CLI, the janitor, the
attach client and the watchdog all build theirs here, and the Celery broker gets the same
address (`worker.records.sentinelurl`, which also reads the URL).

`redis://`, `rediss://` and `unix://` URLs are redis-py's `from_url`, as ever. With a sentinel
URL the client asks the sentinels (with their own login, `SentinelLogin`) which Redis is the
master of `master_name` and talks to it with the URL's login; when a failover elects another,
its calls fail over to it within their retry budget (a connection to a demoted master reads
READONLY and reconnects). A URL with TLS (`?ssl_ca_certs=...`) speaks TLS to both.

Light on purpose (redis-py only): the observers import it.
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry
from redis.sentinel import (
    Sentinel,
    SentinelConnectionPool,
    SentinelManagedConnection,
    SentinelManagedSSLConnection,
)

from worker.records.sentinelurl import (
    SENTINEL_TIMEOUT_S,
    SentinelLogin,
    is_sentinel,
    master_name_problem,
    parse_sentinel,
    sentinel_kwargs,
)

# How often a client asks the sentinels again where the master is (see `_MasterPool`).
MASTER_RECHECK_S = 1.0


def client(
    url: str,
    master_name: str | None = None,
    sentinel_login: SentinelLogin | None = None,
    **kwargs: Any,
) -> redis.Redis:
    """A redis-py client for `url` (`kwargs` are redis-py's connection arguments); with a
    sentinel URL, a client of the master of `master_name`, found through the sentinels (logged
    in to with `sentinel_login`) on each (re)connection. It connects on its first call."""
    if not is_sentinel(url):
        return redis.Redis.from_url(url, **kwargs)
    if problem := master_name_problem(url, master_name):
        raise ValueError(problem)
    addr = parse_sentinel(url)
    given = [kwargs.get("socket_connect_timeout"), kwargs.get("socket_timeout")]
    timeout_s = min([SENTINEL_TIMEOUT_S, *(float(t) for t in given if t)])
    tls = addr.tls_kwargs()
    sentinel: Any = Sentinel(  # type: ignore[no-untyped-call]
        list(addr.sentinels),
        sentinel_kwargs=sentinel_kwargs(timeout_s, sentinel_login, tls),
        **addr.master_kwargs(), **tls,
    )  # fmt: skip
    master: redis.Redis = sentinel.master_for(
        str(master_name), connection_pool_class=_MasterPool,
        connection_class=_MasterSSLConnection if tls else _MasterConnection, **kwargs,
    )  # fmt: skip
    return master


class _MasterConnection(SentinelManagedConnection):
    """A connection to the master that asks the sentinels on every reconnection, and takes
    NOREPLICAS (a master with `min-replicas-to-write` that lost its replicas, as an old master
    does once its replica was promoted) as it takes READONLY: not a master to write to now;
    reconnect and retry (the refused command did not run).

    redis-py 8 reconnects a dropped connection through `connect_check_health`, which goes back
    to the address it had, not through `connect`, which asks the sentinels (redis/redis-py#3874):
    after a failover every retry met the demoted master again (READONLY) until the budget ran
    out. Here both ask the sentinels."""

    def connect_check_health(
        self, check_health: bool = True, retry_socket_connect: bool = True
    ) -> None:
        if not self._sock:  # SentinelManagedConnection's: the master's address, then connect_to
            self.connect()  # type: ignore[no-untyped-call]

    def connect_to(self, address: tuple[str, int]) -> None:
        self.host, self.port = address
        super(SentinelManagedConnection, self).connect_check_health(
            check_health=self.connection_pool.check_connection, retry_socket_connect=False
        )

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().read_response(*args, **kwargs)
        except redis.ResponseError as exc:
            if not str(exc).startswith("NOREPLICAS"):
                raise
            self.disconnect()  # type: ignore[no-untyped-call]
            raise redis.ConnectionError(f"the master refuses writes: {exc}") from None


class _MasterSSLConnection(_MasterConnection, SentinelManagedSSLConnection):
    """`_MasterConnection` over TLS (its `connect_to` reaches SSLConnection's connect)."""


class _MasterPool(SentinelConnectionPool):
    """redis-py asks the sentinels where the master is only when it opens a connection, and a
    planned failover (SENTINEL FAILOVER) leaves the old master writable, its clients connected,
    until the sentinels demote it (about ten seconds later): what they write meanwhile is lost.
    This pool asks again, at most every MASTER_RECHECK_S, as a command takes a connection; when
    the master moved, its idle connections are closed and those in use are dropped when
    released (redis-py's own handling of a new address), never in the middle of a transaction.
    The window left is the sentinels' own, from the promotion to their switch (about a second):
    README, "Redis Sentinel", says how a planned switchover closes it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]
        self._asked_at = -math.inf

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        now = time.monotonic()
        if now - self._asked_at >= MASTER_RECHECK_S:
            self._asked_at = now
            # (no answer now: the connection's own retries ask again)
            with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
                self.get_master_address()  # type: ignore[no-untyped-call]
        return super().get_connection(*args, **kwargs)


def redis_retry(budget_s: float) -> Retry:
    """Retries with backoff (50 ms doubling to 1 s) that last about `budget_s` while Redis is
    unreachable: a short outage (a restart, a failover) costs time, not the job."""
    backoff_cap_s = 1.0
    ramp = 5  # 0.05 + 0.1 + 0.2 + 0.4 + 0.8 s before the cap
    retries = 0 if budget_s <= 0 else ramp + max(0, math.ceil(budget_s / backoff_cap_s))
    return Retry(ExponentialBackoff(cap=backoff_cap_s, base=0.05), retries)


def connect(
    url: str,
    retry_s: float,
    master_name: str | None = None,
    sentinel_login: SentinelLogin | None = None,
) -> redis.Redis:
    """A client whose every call survives an outage (or a failover) of `retry_s`."""
    return client(
        url,
        master_name,
        sentinel_login,
        socket_connect_timeout=5,
        socket_timeout=30,
        health_check_interval=30,
        retry=redis_retry(retry_s),
    )
