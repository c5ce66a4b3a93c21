"""The gate's loop: every user's requests stream read with one consumer group, each request
validated and carried out (`ops.handle`) as the user the stream belongs to, its answer pushed to
the user's reply list, the entry acknowledged and deleted.

Owns the streams (which users there are: `ACL USERS`, refreshed every `refresh_s` when a read
times out; without ACLs the only user is `default`), the consumer group (created from the
stream's start, so a request written before any gate ran is handled), taking over what a dead
gate left pending (`XAUTOCLAIM` after `claim_idle_ms`), and surviving what a user may do to their
own stream (delete it, its group, or put another type there: that user's requests wait, never
anyone else's). The lease that lets one gate serve at a time is `lease.py`'s.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis
from pydantic import ValidationError

from worker.gate import wire
from worker.gate.ops import GateContext, Requester, handle
from worker.people.acl import operator_probe_key
from worker.people.identity import NO_ACL_USER, USER_NAME, may_user_write_others

log = logging.getLogger(__name__)

GROUP = "gate"
REPLY_TTL_S = 600  # an answer nobody popped (its client gave up waiting) goes after this
MAX_REQUEST_BYTES = 128 * 1024 * 1024
# One gate serves at a time: what is pending when a gate takes the lease over was left by gates
# that lost it (died), and is taken over at once; a request pending this long is looked for
# this often besides (a backstop).
CLAIM_IDLE_MS = 15_000
CLAIM_EVERY_S = 60.0
_OPERATOR_CACHE_S = 10.0


def consumer_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass
class Gate:
    ctx: GateContext
    consumer: str = field(default_factory=consumer_name)
    block_ms: int = 1000
    refresh_s: float = 5.0
    claim_idle_ms: int = CLAIM_IDLE_MS
    say: Callable[[str], None] = log.warning
    users: tuple[str, ...] = ()
    _refreshed_at: float = float("-inf")
    _claimed_at: float = float("-inf")
    _operators: dict[str, tuple[bool, float]] = field(default_factory=dict)
    _broken: set[str] = field(default_factory=set)
    _said_no_users: bool = False
    _own_pending: bool = True  # a gate (re)starting reads its own unacknowledged entries first
    _took_over: bool = False  # the next claim takes every pending request, however recent

    @property
    def r(self) -> Any:
        return self.ctx.ledger.r

    def stream(self, user: str) -> str:
        return self.ctx.ledger.keys.requests(user)

    # --- one step ---------------------------------------------------------------------------

    def step(self, now: float) -> int:
        """Handle the requests waiting (blocking up to `block_ms` for the first); returns how
        many were handled."""
        if now - self._refreshed_at >= self.refresh_s:
            self.refresh(now)
        # After an outage, this gate's own unacknowledged requests first ("0"), then new ones.
        start = "0" if self._own_pending else ">"
        streams = {self.stream(u): start for u in self.users if u not in self._broken}
        if not streams:  # every stream broken by its user until the next refresh
            time.sleep(self.block_ms / 1000)
            return 0
        rows = self._claim(now) if now - self._claimed_at >= CLAIM_EVERY_S else []
        self._took_over = False
        block = None if rows or self._own_pending else self.block_ms
        try:
            got = self.r.xreadgroup(GROUP, self.consumer, streams, count=16, block=block)
        except redis.ResponseError as exc:
            self._repair(str(exc))
            return 0
        self._own_pending = False
        for key, entries in got or []:
            rows += [(key, i, f) for i, f in entries]
        try:
            for key, entry_id, fields in rows:
                self.handle_entry(_decoded(key), entry_id, fields)
        except (redis.ConnectionError, redis.TimeoutError):
            self._own_pending = True
            raise
        return len(rows)

    def handle_entry(self, key: str, entry_id: Any, fields: dict[bytes, bytes] | None) -> None:
        """Answer one request, then acknowledge and delete it (an answer is never sent twice
        for one handling; a request handled again after a crash is answered again)."""
        user = self._user_of(key)
        raw = (fields or {}).get(b"r", b"")
        reply = self._answer(user, raw) if user is not None else None
        pipe = self.r.pipeline(transaction=False)
        if reply is not None:
            reply_key = self.ctx.ledger.keys.reply(user or "", reply.rid)
            pipe.rpush(reply_key, reply.model_dump_json())
            pipe.expire(reply_key, REPLY_TTL_S)
        pipe.xack(key, GROUP, entry_id)
        pipe.xdel(key, entry_id)
        # A reply list its user made into another type is theirs to lose: never an error here.
        for done in pipe.execute(raise_on_error=False):
            if isinstance(done, (redis.ConnectionError, redis.TimeoutError)):
                raise done

    def _answer(self, user: str, raw: bytes) -> wire.Reply | None:
        if len(raw) > MAX_REQUEST_BYTES:
            too_big = f"The request is over {MAX_REQUEST_BYTES >> 20} MiB."
            return _refused(_request_id(raw[:4096]), too_big)
        try:
            req = wire.Request.model_validate_json(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            return _refused(
                _request_id(raw), f"The gate could not read the request ({where}: "
                f"{first['msg']}): use the colabq version the deployment runs.",
            )  # fmt: skip
        who = Requester(user, req.host, req.local_user, self.is_operator(user))
        try:
            result = handle(self.ctx, who, req.body)
        except (redis.ConnectionError, redis.TimeoutError):
            raise  # not acknowledged: handled again once Redis answers
        except Exception as exc:  # a bug must not stop the gate for everyone
            log.exception("gate: request %s of %s failed", req.rid, user)
            result = wire.Refused(error="error", message=f"The gate failed on this request: {exc}")
        return wire.Reply(rid=req.rid, result=result)

    def take_over(self) -> None:
        """This gate just took the lease: the users are read again at once, and what a dead
        gate left pending is taken over at the next step."""
        self._refreshed_at = self._claimed_at = float("-inf")
        self._own_pending = self._took_over = True

    # --- users and their streams ------------------------------------------------------------

    def refresh(self, now: float) -> None:
        """The users (`ACL USERS`) whose streams are read, each stream's group made if new."""
        self._refreshed_at = now
        self._broken.clear()
        try:
            names = [_decoded(n) for n in self.r.execute_command("ACL", "USERS")]
        except redis.exceptions.NoPermissionError:
            if not self._said_no_users:
                self.say(
                    "colabq gate: this Redis user may not run ACL USERS, so it serves only the "
                    "`default` user: apply `colabq acl NAME --service` to the gate's user."
                )
            self._said_no_users = True
            names = [NO_ACL_USER]
        users = tuple(sorted(n for n in names if n == NO_ACL_USER or USER_NAME.fullmatch(n)))
        for user in set(users) - set(self.users):
            self._ensure_group(user)
        self.users = users

    def _ensure_group(self, user: str) -> None:
        try:
            self.r.xgroup_create(self.stream(user), GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" in str(exc):
                return
            self._broken.add(user)  # not a stream: that user's requests wait for a refresh
            self.say(f"colabq gate: {self.stream(user)} is not a requests stream ({exc}).")

    def _repair(self, error: str) -> None:
        """A user deleted their stream or its group, or put another type there: make each
        group again, and leave out (until the next refresh) the streams that cannot have one."""
        log.info("gate: repairing the request streams after: %s", error)
        for user in self.users:
            self._ensure_group(user)

    def _claim(self, now: float) -> list[tuple[Any, Any, Any]]:
        """What a dead gate left pending longer than `claim_idle_ms`, taken over."""
        self._claimed_at = now
        rows: list[tuple[Any, Any, Any]] = []
        for user in self.users:
            if user in self._broken:
                continue
            idle_ms, cursor = (0 if self._took_over else self.claim_idle_ms), "0-0"
            for _ in range(100):  # at most 10,000 requests a stream at a time
                try:
                    reply = self.r.xautoclaim(
                        self.stream(user), GROUP, self.consumer, idle_ms, cursor, count=100
                    )
                except redis.ResponseError:
                    break  # repaired at the next read
                rows += [(self.stream(user), i, f) for i, f in reply[1]]
                cursor = _decoded(reply[0])
                if cursor == "0-0":
                    break
        return rows

    def _user_of(self, key: str) -> str | None:
        """The user whose stream `key` is: the only name of the requester the gate trusts."""
        user = self.ctx.ledger.keys.requests_user(key)
        return user if user in self.users else None

    def is_operator(self, user: str) -> bool:
        """Whether Redis lets `user` write outside their namespace (asked at most every few
        seconds per user); everyone is, without ACLs."""
        if user == NO_ACL_USER:
            return True
        now = time.monotonic()
        known = self._operators.get(user)
        if known is None or now - known[1] > _OPERATOR_CACHE_S:
            probe = operator_probe_key(self.ctx.ledger.keys.prefix)
            known = (may_user_write_others(self.r, user, probe), now)
            self._operators[user] = known
        return known[0]


def _decoded(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


_RID = re.compile(rb'"rid"\s*:\s*"([0-9a-f]{32})"')


def _request_id(raw: bytes) -> str | None:
    """The request's id, from a request the gate cannot read otherwise (to say so)."""
    found = _RID.search(raw)
    return found.group(1).decode() if found else None


def _refused(rid: str | None, message: str) -> wire.Reply | None:
    if rid is None:
        return None  # nobody to answer: the request is dropped (its client times out)
    return wire.Reply(rid=rid, result=wire.Refused(error="user_input", message=message))
