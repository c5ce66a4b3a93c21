"""The one way colabq builds a Redis client from `COLABQ_REDIS_URL` (and, with Sentinel,
`COLABQ_REDIS_MASTER_NAME`): the worker, the CLI, the janitor, the attach client and the
watchdog all build theirs here, and the Celery broker gets the same address (`broker_url`).

`redis://`, `rediss://` and `unix://` URLs are redis-py's `from_url`, as ever. Sentinel is
kombu's form: one `sentinel://[USER:PASSWORD@]HOST[:PORT][/DB]` part per sentinel, joined by
`;` (port 26379 when none is written). The client asks the sentinels which Redis is the master
of `master_name` and talks to it; when a failover elects another, its calls fail over to it
within their retry budget (a connection to a demoted master reads READONLY and reconnects).
The user, password and database are the master's: the sentinels are asked without them, as
kombu asks them. kombu reads them from the first part, and again from each part it switches
to: colabq takes them from whichever parts write them (they must agree) and gives kombu every
part with them, so the broker and the ledger use the same database whatever kombu switches to.

Light on purpose (redis-py only): the observers import it.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import redis
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelConnectionPool, SentinelManagedConnection

SENTINEL_SCHEME = "sentinel"
SENTINEL_PORT = 26379
# A sentinel answers at once or not at all: asking one that hangs must not hold up the next.
SENTINEL_TIMEOUT_S = 5.0
# How often a client asks the sentinels again where the master is (see `_MasterPool`).
MASTER_RECHECK_S = 1.0


def is_sentinel(url: str) -> bool:
    return url.lower().startswith(f"{SENTINEL_SCHEME}://")


@dataclass(frozen=True)
class SentinelAddress:
    """A `sentinel://` URL read: the sentinels, and how to log in to the master they name."""

    sentinels: tuple[tuple[str, int], ...]
    db: int = 0
    username: str | None = None
    password: str | None = None

    def master_kwargs(self) -> dict[str, Any]:
        """The master's database and login, as redis-py's connection arguments."""
        found: dict[str, Any] = {"db": self.db}
        if self.username is not None:
            found["username"] = self.username
        if self.password is not None:
            found["password"] = self.password
        return found


def parse_sentinel(url: str) -> SentinelAddress:
    """The sentinels of a `sentinel://` URL; ValueError(why) when it is not one colabq uses."""
    hosts: list[tuple[str, int]] = []
    dbs: set[int] = set()
    logins: set[tuple[str | None, str | None]] = set()
    texts = url.split(";")
    for n, text in enumerate(texts, 1):
        if not is_sentinel(text):  # (the part is not echoed: it may hold a password)
            raise ValueError(f"part {n} of {len(texts)} (between ';') is not sentinel://HOST:PORT")
        parts = urlsplit(text)
        if parts.query or parts.fragment:
            raise ValueError("a sentinel:// part takes no ?query (sentinel://HOST:PORT/DB)")
        try:
            port = parts.port
        except ValueError:
            port_text = parts.netloc.rpartition(":")[2]
            raise ValueError(f"the port {port_text!r} is not a number in 1-65535") from None
        if port == 0:
            raise ValueError("the port must be in 1-65535")
        if not parts.hostname:
            raise ValueError("a sentinel:// part names no host (sentinel://HOST:PORT)")
        hosts.append((parts.hostname, port or SENTINEL_PORT))
        if db_text := parts.path.strip("/"):
            if not db_text.isdigit():
                raise ValueError(f"the database {db_text!r} is not a non-negative integer")
            dbs.add(int(db_text))
        if parts.username or parts.password is not None:
            user = unquote(parts.username) if parts.username else None
            logins.add((user, None if parts.password is None else unquote(parts.password)))
    if len(dbs) > 1:
        listed = " and ".join(str(d) for d in sorted(dbs))
        raise ValueError(f"its parts name different databases ({listed}): name one")
    if len(logins) > 1:
        raise ValueError("its parts hold different logins: write the same USER:PASSWORD@ on each")
    (username, password) = next(iter(logins), (None, None))
    return SentinelAddress(tuple(hosts), next(iter(dbs), 0), username, password)


def sentinel_url_problem(url: str) -> str | None:
    """Why `url` is not a `sentinel://` URL colabq can use, or None."""
    try:
        parse_sentinel(url)
    except ValueError as exc:
        return str(exc)
    return None


def master_name_problem(url: str, name: str | None) -> str | None:
    """Why `name` cannot be the master's name for `url`, or None (it is read only with
    sentinel:// URLs)."""
    if not is_sentinel(url):
        return None
    if not name:
        return (
            "a sentinel:// COLABQ_REDIS_URL needs the name of the master its sentinels monitor "
            "(NAME in their `sentinel monitor NAME HOST PORT QUORUM`)"
        )
    if not name.isprintable() or any(c.isspace() for c in name):
        return "must be one word (no spaces): the NAME of `sentinel monitor NAME ...`"
    return None


def broker_url(url: str) -> str:
    """`url` as kombu reads it: a sentinel URL with its database and login on every part (kombu
    takes them from the part it is on); any other URL unchanged."""
    if not is_sentinel(url):
        return url
    addr = parse_sentinel(url)
    login = ""
    if addr.username is not None or addr.password is not None:
        login = quote(addr.username or "", safe="")
        if addr.password is not None:
            login += ":" + quote(addr.password, safe="")
        login += "@"
    return ";".join(
        f"{SENTINEL_SCHEME}://{login}{_netloc(host, port)}/{addr.db}"
        for host, port in addr.sentinels
    )


def broker_transport_options(master_name: str | None, url: str) -> dict[str, Any]:
    """kombu's options for the Sentinel transport (none for any other URL)."""
    if not is_sentinel(url):
        return {}
    return {"master_name": master_name, "sentinel_kwargs": _sentinel_kwargs(SENTINEL_TIMEOUT_S)}


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _sentinel_kwargs(timeout_s: float) -> dict[str, Any]:
    # No retry per sentinel: redis-py asks the next one, and the caller's retry asks them all
    # again. (retry None is "no retries" to redis-py, and a plain value in Celery's config.)
    return {"socket_connect_timeout": timeout_s, "socket_timeout": timeout_s, "retry": None}


def client(url: str, master_name: str | None = None, **kwargs: Any) -> redis.Redis:
    """A redis-py client for `url` (`kwargs` are redis-py's connection arguments); with a
    sentinel URL, a client of the master of `master_name`, found through the sentinels on
    each (re)connection. It connects on its first call."""
    if not is_sentinel(url):
        return redis.Redis.from_url(url, **kwargs)
    if problem := master_name_problem(url, master_name):
        raise ValueError(problem)
    addr = parse_sentinel(url)
    given = [kwargs.get("socket_connect_timeout"), kwargs.get("socket_timeout")]
    timeout_s = min([SENTINEL_TIMEOUT_S, *(float(t) for t in given if t)])
    sentinel: Any = Sentinel(  # type: ignore[no-untyped-call]
        list(addr.sentinels), sentinel_kwargs=_sentinel_kwargs(timeout_s), **addr.master_kwargs()
    )
    master: redis.Redis = sentinel.master_for(
        str(master_name), connection_pool_class=_MasterPool, connection_class=_MasterConnection,
        **kwargs,
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


def connect(url: str, retry_s: float, master_name: str | None = None) -> redis.Redis:
    """A client whose every call survives an outage (or a failover) of `retry_s`."""
    return client(
        url,
        master_name,
        socket_connect_timeout=5,
        socket_timeout=30,
        health_check_interval=30,
        retry=redis_retry(retry_s),
    )


@dataclass(frozen=True)
class SentinelView:
    """What the sentinels of a URL say of one master (`colabq doctor`)."""

    asked: int
    answered: int  # those that know the master
    masters: tuple[str, ...]  # the addresses they name it at, without repeats
    replicas: int  # the most any of them counts up (a dead master demoted is listed, down)
    quorum: str  # SENTINEL CKQUORUM's reply (or refusal) from one that answered; "" if none
    problems: tuple[str, ...]  # "HOST:PORT: why", for each that did not answer


def ask_sentinels(url: str, master_name: str, timeout_s: float) -> SentinelView:
    """Ask every sentinel of `url` at once what it knows of `master_name`."""
    from concurrent.futures import ThreadPoolExecutor

    hosts = parse_sentinel(url).sentinels

    def ask(address: tuple[str, int]) -> tuple[dict[str, Any] | None, int, str]:
        r = redis.Redis(
            *address, socket_connect_timeout=timeout_s, socket_timeout=timeout_s,
            retry=Retry(NoBackoff(), 0), decode_responses=True,
        )  # fmt: skip
        try:
            state: Any = r.sentinel_master(master_name)
            listed: Any = r.sentinel_slaves(master_name)
            up = sum(not (x["is_sdown"] or x["is_odown"] or x["is_disconnected"]) for x in listed)
            try:
                ask_quorum: Any = r.execute_command
                return state, up, str(ask_quorum("SENTINEL", "CKQUORUM", master_name))
            except redis.ResponseError as exc:  # NOQUORUM ...: a failover could not be agreed
                return state, up, str(exc)
        except redis.RedisError as exc:
            return None, 0, " ".join(str(exc).split())[:120] or type(exc).__name__
        finally:
            r.close()

    with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
        replies = list(pool.map(ask, hosts))
    masters: dict[str, None] = {}
    replicas, quorum, problems = 0, "", []
    for (host, port), (state, up, text) in zip(hosts, replies, strict=True):
        if state is None:
            problems.append(f"{_netloc(host, port)}: {text}")
            continue
        masters[_netloc(str(state["ip"]), int(state["port"]))] = None
        replicas = max(replicas, up)
        quorum = quorum or text
    answered = len(hosts) - len(problems)
    return SentinelView(len(hosts), answered, tuple(masters), replicas, quorum, tuple(problems))
