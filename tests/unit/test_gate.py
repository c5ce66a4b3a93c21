"""The gate's loop (`worker.gate.serve`, `worker.gate.duty`) on the real Redis, on a private key
prefix: a request is answered on its user's reply list and deleted from the stream; the same
request handled again changes nothing more; what a dead gate left pending is taken over; a user
who breaks their own stream delays only their own requests; one gate serves at a time and
another takes over when it stops; idle, a step is one Redis command."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.connection import AbstractConnection

from tests.factories import make_spec
from worker.celery_app import build_app
from worker.clock import SystemClock
from worker.gate import wire
from worker.gate.duty import GateDuty, build_gate_duty
from worker.gate.ops import GateContext
from worker.gate.serve import GROUP, Gate
from worker.people.acl import Role, rules_for
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.settings import Settings, load_settings
from worker.states import JobState


@pytest.fixture
def settings(redis_url: str, key_prefix: str) -> Settings:
    return load_settings(redis_url=redis_url, key_prefix=key_prefix, queue_prefix=f"{key_prefix}.")


@pytest.fixture
def ledger(redis_client: redis.Redis, settings: Settings) -> Iterator[Ledger]:
    yield Ledger(redis_client, SystemClock(), Keys(settings.key_prefix), log_maxlen=1000)
    for pattern in (f"{settings.key_prefix}*", f"_kombu.binding.{settings.key_prefix}*"):
        for key in redis_client.scan_iter(pattern):
            redis_client.delete(key)


@pytest.fixture
def gate(ledger: Ledger, settings: Settings) -> Iterator[Gate]:
    app = build_app(settings)
    yield Gate(GateContext(ledger, app, settings), block_ms=50, refresh_s=3600)
    app.close()


def send(ledger: Ledger, user: str, body: wire.Body) -> str:
    rid = secrets.token_hex(16)
    req = wire.Request(rid=rid, host="laptop", local_user="alice", body=body)
    ledger.r.xadd(ledger.keys.requests(user), {"r": req.model_dump_json()})
    return rid


def answer(ledger: Ledger, user: str, rid: str) -> wire.Result:
    raw = ledger.r.lpop(ledger.keys.reply(user, rid))
    assert raw is not None, f"no answer to {rid}"
    return wire.Reply.model_validate_json(raw).result


def serve_until(gate: Gate, done: Any, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "the gate never got there"
        gate.step(time.time())


def test_a_request_is_answered_on_its_users_list_and_leaves_the_stream(
    gate: Gate, ledger: Ledger
) -> None:
    spec = make_spec()
    rid = send(ledger, "default", wire.Submit(specs=(spec,)))
    serve_until(gate, lambda: ledger.r.exists(ledger.keys.reply("default", rid)))
    assert 0 < ledger.r.ttl(ledger.keys.reply("default", rid)) <= 600  # if nobody pops it
    result = answer(ledger, "default", rid)
    assert isinstance(result, wire.Submitted)
    [job] = result.jobs
    assert job.created and job.state is JobState.QUEUED
    assert job.job_id != spec.job_id  # the gate gives the id, never the client
    assert ledger.get(job.job_id).spec.run_name == spec.run_name
    assert ledger.r.llen(f"{ledger.keys.prefix}.gpu.t4") == 1
    stream = ledger.keys.requests("default")
    assert ledger.r.xlen(stream) == 0
    assert ledger.r.xpending(stream, GROUP)["pending"] == 0


def test_the_same_request_handled_again_changes_nothing_more(gate: Gate, ledger: Ledger) -> None:
    spec = make_spec()
    req = wire.Request(rid="ab" * 16, host="h", local_user="u", body=wire.Submit(specs=(spec,)))
    fields = {b"r": req.model_dump_json().encode()}
    gate.refresh(time.time())
    stream = ledger.keys.requests("default")
    for _ in range(2):  # a gate that died before acknowledging: the request comes again
        entry = ledger.r.xadd(stream, fields)
        gate.handle_entry(stream, entry, fields)
    replies = ledger.r.lrange(ledger.keys.reply("default", "ab" * 16), 0, -1)
    first, second = (wire.Reply.model_validate_json(raw).result for raw in replies)
    assert isinstance(first, wire.Submitted) and isinstance(second, wire.Submitted)
    assert first.jobs[0].created and not second.jobs[0].created
    assert first.jobs[0].job_id == second.jobs[0].job_id
    assert ledger.r.zcard(ledger.keys.jobs()) == 1
    assert ledger.r.llen(f"{ledger.keys.prefix}.gpu.t4") == 1  # one message


def test_what_a_dead_gate_left_pending_is_taken_over(gate: Gate, ledger: Ledger) -> None:
    gate.refresh(time.time())
    stream = ledger.keys.requests("default")
    rid = send(ledger, "default", wire.Cancel(jobs=("0123456789abcdef",)))
    dead = ledger.r.xreadgroup(GROUP, "dead-gate", {stream: ">"}, count=10)
    assert dead and ledger.r.xpending(stream, GROUP)["pending"] == 1
    gate.step(time.time())  # pending for moments only: another gate may still be on it
    assert ledger.r.xpending(stream, GROUP)["pending"] == 1
    gate.take_over()  # the lease was the dead gate's: whatever it held is taken now
    serve_until(gate, lambda: ledger.r.exists(ledger.keys.reply("default", rid)))
    result = answer(ledger, "default", rid)
    assert isinstance(result, wire.Refused) and result.error == "not_found"
    assert ledger.r.xpending(stream, GROUP)["pending"] == 0


def test_an_unreadable_request_is_answered_when_it_names_its_id_and_dropped_otherwise(
    gate: Gate, ledger: Ledger
) -> None:
    stream = ledger.keys.requests("default")
    rid = "cd" * 16
    ledger.r.xadd(stream, {"r": f'{{"rid": "{rid}", "body": {{"op": "flushall"}}}}'})
    ledger.r.xadd(stream, {"r": "not json at all"})
    ledger.r.xadd(stream, {"other": "field"})
    serve_until(gate, lambda: ledger.r.exists(ledger.keys.reply("default", rid)))
    serve_until(gate, lambda: ledger.r.xlen(stream) == 0)
    result = answer(ledger, "default", rid)
    assert isinstance(result, wire.Refused) and "could not read the request" in result.message
    assert ledger.r.xpending(stream, GROUP)["pending"] == 0


@pytest.fixture
def users(redis_client: redis.Redis, key_prefix: str) -> Iterator[dict[str, str]]:
    """Two ACL users (alice, bob) with the user rule, named uniquely for the test."""
    tag = secrets.token_hex(3)
    names = {who: f"{who}-{tag}" for who in ("alice", "bob")}
    for name in names.values():
        rules = rules_for(name, Role.USER, key_prefix, f"{key_prefix}.")
        redis_client.execute_command("ACL", "SETUSER", name, "on", "nopass", *rules)
    yield names
    for name in names.values():
        redis_client.execute_command("ACL", "DELUSER", name)


def test_a_user_who_breaks_their_own_stream_delays_only_their_own_requests(
    gate: Gate, ledger: Ledger, users: dict[str, str]
) -> None:
    alice, bob = users["alice"], users["bob"]
    gate.refresh(time.time())
    assert {alice, bob} <= set(gate.users)
    for breakage in ("deleted", "a string", "its group destroyed"):
        mine = ledger.keys.requests(alice)
        if breakage == "deleted":
            ledger.r.delete(mine)
        elif breakage == "a string":
            ledger.r.delete(mine)
            ledger.r.set(mine, "not a stream")
        else:
            ledger.r.delete(mine)
            gate._ensure_group(alice)
            ledger.r.xgroup_destroy(mine, GROUP)
        rid = send(ledger, bob, wire.Cancel(jobs=("0123456789abcdef",)))
        serve_until(gate, lambda: ledger.r.exists(ledger.keys.reply(bob, rid)))  # noqa: B023
        assert isinstance(answer(ledger, bob, rid), wire.Refused), breakage
    ledger.r.delete(ledger.keys.requests(alice))
    gate.refresh(time.time())
    rid = send(ledger, alice, wire.Cancel(jobs=("0123456789abcdef",)))
    serve_until(gate, lambda: ledger.r.exists(ledger.keys.reply(alice, rid)))


def test_an_idle_step_is_one_redis_command(gate: Gate, monkeypatch: pytest.MonkeyPatch) -> None:
    now = time.time()
    gate.step(now)  # the users read, the streams' groups made, pending requests looked for
    sent = [0]
    real = AbstractConnection.send_packed_command

    def counted(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
        sent[0] += 1 if isinstance(command, bytes | str) else len(command)
        real(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counted)
    for _ in range(5):
        assert gate.step(now) == 0
    assert sent[0] == 5


def wait_for(what: str, done: Any, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_one_gate_serves_at_a_time_and_another_takes_over_when_it_stops(
    ledger: Ledger, settings: Settings
) -> None:
    duties: list[GateDuty] = []
    for _ in range(2):
        duty = build_gate_duty(settings, ledger, build_app(settings), lambda s: None, block_ms=50)
        duty.gate.consumer += f"-{len(duties)}"
        duties.append(duty)
        duty.start()
    try:
        wait_for("a gate serves", lambda: any(d.serving for d in duties))
        first = next(d for d in duties if d.serving)
        other = next(d for d in duties if d is not first)
        looked = other.looked
        wait_for("the other looks again", lambda: other.looked > looked)
        assert not other.serving  # it stands by
        assert ledger.r.get(ledger.keys.gate_lease()).decode() == first.gate.consumer
        first.close()
        wait_for("the other gate takes over", lambda: other.serving)
        rid = send(ledger, "default", wire.Cancel(jobs=("0123456789abcdef",)))
        wait_for("its answer", lambda: ledger.r.exists(ledger.keys.reply("default", rid)))
    finally:
        for duty in duties:
            duty.close()


def test_a_reply_list_its_user_spoiled_never_holds_back_another_users_answer(
    gate: Gate, ledger: Ledger, users: dict[str, str]
) -> None:
    alice, bob = users["alice"], users["bob"]
    gate.refresh(time.time())
    hers = send(ledger, alice, wire.Cancel(jobs=("0123456789abcdef",)))
    ledger.r.set(ledger.keys.reply(alice, hers), "not a list")  # before the gate answers
    his = send(ledger, bob, wire.Cancel(jobs=("0123456789abcdef",)))
    serve_until(gate, lambda: ledger.r.exists(ledger.keys.reply(bob, his)))
    assert isinstance(answer(ledger, bob, his), wire.Refused)
    assert ledger.r.xlen(ledger.keys.requests(alice)) == 0  # hers was handled, its answer lost
    assert ledger.r.xpending(ledger.keys.requests(alice), GROUP)["pending"] == 0
