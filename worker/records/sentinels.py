"""Asking the sentinels directly: what each says of one master (`colabq doctor`), and, when a
first call failed, whose login was refused: the sentinels' (`COLABQ_REDIS_SENTINEL_PASSWORD`)
or the master's (`COLABQ_REDIS_URL`), as one `RedisLoginRefused` line for the commands that
start (`colabq worker`, `beat`, `status`, `doctor`, ...). Builds clients for one question each;
the clients colabq works with are `worker.records.redisconn`'s.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError

from worker.errors import RedisLoginRefused
from worker.records.sentinelurl import (
    SENTINEL_TIMEOUT_S,
    SentinelLogin,
    is_sentinel,
    netloc,
    parse_sentinel,
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
    refused: int = 0  # those that refused colabq's login (among the problems)


Reply = tuple[dict[str, Any] | None, int, str, bool]  # state, replicas up, quorum or why, refused


def ask_sentinels(
    url: str, master_name: str, timeout_s: float, login: SentinelLogin | None = None
) -> SentinelView:
    """Ask every sentinel of `url` at once (with `login`, and TLS when the URL says so) what it
    knows of `master_name`."""
    addr = parse_sentinel(url)
    connection = {**(login or SentinelLogin()).kwargs(), **addr.tls_kwargs()}
    if addr.tls:
        connection["ssl"] = True

    def ask(address: tuple[str, int]) -> Reply:
        r = redis.Redis(
            *address, socket_connect_timeout=timeout_s, socket_timeout=timeout_s,
            retry=Retry(NoBackoff(), 0), decode_responses=True, **connection,
        )  # fmt: skip
        try:
            state: Any = r.sentinel_master(master_name)
            listed: Any = r.sentinel_slaves(master_name)
            up = sum(not (x["is_sdown"] or x["is_odown"] or x["is_disconnected"]) for x in listed)
            try:
                ask_quorum: Any = r.execute_command
                return state, up, str(ask_quorum("SENTINEL", "CKQUORUM", master_name)), False
            except redis.ResponseError as exc:  # NOQUORUM ...: a failover could not be agreed
                return state, up, str(exc), False
        except redis.AuthenticationError:
            return None, 0, "refused colabq's login (COLABQ_REDIS_SENTINEL_PASSWORD)", True
        except redis.RedisError as exc:
            return None, 0, " ".join(str(exc).split())[:120] or type(exc).__name__, False
        finally:
            r.close()

    hosts = addr.sentinels
    with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
        replies = list(pool.map(ask, hosts))
    masters: dict[str, None] = {}
    replicas, quorum, problems, refused = 0, "", [], 0
    for (host, port), (state, up, text, was_refused) in zip(hosts, replies, strict=True):
        if state is None:
            problems.append(f"{netloc(host, port)}: {text}")
            refused += was_refused
            continue
        masters[netloc(str(state["ip"]), int(state["port"]))] = None
        replicas = max(replicas, up)
        quorum = quorum or text
    answered = len(hosts) - len(problems)
    return SentinelView(
        len(hosts), answered, tuple(masters), replicas, quorum, tuple(problems), refused
    )


def login_refusal(
    exc: BaseException,
    url: str,
    master_name: str | None,
    login: SentinelLogin | None,
    timeout_s: float = SENTINEL_TIMEOUT_S,
) -> RedisLoginRefused | None:
    """Whose login was refused, when `exc` is how a first call to `url` failed; None when it
    failed for another reason. redis-py reports a sentinel that refused as one it could not
    reach (MasterNotFoundError), so the sentinels are asked again, one by one, to tell."""
    if isinstance(exc, redis.AuthenticationError):  # the master's (or a plain Redis's) own
        return RedisLoginRefused(url, master_name if is_sentinel(url) else None)
    if is_sentinel(url) and master_name and isinstance(exc, MasterNotFoundError):
        seen = ask_sentinels(url, master_name, timeout_s, login)
        if seen.refused and not seen.answered:
            return RedisLoginRefused(url, master_name, sentinels=True)
    return None
