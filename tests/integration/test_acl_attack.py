"""A hostile user of a shared deployment cannot stop anyone else's jobs (issue 26): the worker
runs as the service user on the emulator (its gate duty too), alice submits two jobs (the first
RUNNING on the worker's one slot until the test lets it end, the second QUEUED behind it), and
while they are so mallory, a user with the rule `colabq acl` prints, runs the whole attack: the
ACL DRYRUN matrix, every write family for real on every shared key (alice's records, histories,
logs, the indexes, the GPU queue holding her QUEUED job's message, kombu's bindings, the event log
and the notifier's group on it, the worker's card, the gate's lease and alice's requests stream),
every publish on Celery's channels, requests naming her jobs through the CLI and forged ones in
mallory's own stream, and breaking her own stream under the gate. Every write is refused, every
request refused in one line, and both of alice's jobs SUCCEED."""

from __future__ import annotations

import json
import secrets

import pytest
import redis
from typer.testing import CliRunner

from producer.cli import app
from tests.integration.aclfleet import (  # noqa: F401 (fixtures)
    SERVICE,
    fleet_env_extra,
    login,
    make_user,
    users,
)
from tests.integration.conftest import Fleet
from worker.gate import wire
from worker.gate.serve import GROUP
from worker.people.acl import Role
from worker.people.aclcheck import allowed
from worker.people.surface import WRITES, probes, surface
from worker.states import JobState

pytestmark = pytest.mark.integration
runner = CliRunner()
WAIVE = ["--waive", "config-diff", "--waive", "paths", "--waive", "monitoring"]


def submit(env: dict[str, str], name: str, script: str, *extra: str) -> str:
    res = runner.invoke(
        app, ["submit", script, "--name", name, "--wall", "10m", "--json", *WAIVE, *extra],
        env=env,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    return str(json.loads(res.stdout)["jobs"][0]["job_id"])


def test_a_hostile_user_cannot_stop_anyone_elses_queued_or_running_jobs(
    fleet: Fleet,
    redis_url: str,
    users: list[str],  # noqa: F811
) -> None:
    alice, mallory = make_user(fleet, users, "alice"), make_user(fleet, users, "mallory")
    go = fleet.share() / "go"
    (fleet.root / "long.sh").write_text(
        f"echo started\nwhile [ ! -f {go} ]; do sleep 0.2; done\necho 'epoch 1 loss=0.5'\n"
    )
    (fleet.root / "short.sh").write_text("echo 'epoch 1 loss=0.4'\n")
    as_alice = {**fleet.env, "COLABQ_REDIS_URL": login(redis_url, alice)}
    store = ["--local-store", str(fleet.root / "store")]
    running = submit(as_alice, "victim-running", str(fleet.root / "long.sh"), *store)
    fleet.wait_state(running, JobState.RUNNING, timeout_s=120)
    queued = submit(as_alice, "victim-queued", str(fleet.root / "short.sh"), *store)
    assert fleet.ledger.state_of(queued) is JobState.QUEUED

    as_mallory = {**fleet.env, "COLABQ_REDIS_URL": login(redis_url, mallory)}
    attacker = redis.Redis.from_url(login(redis_url, mallory))
    attack(fleet, attacker, mallory, alice, (running, queued))
    refuse_requests(fleet, as_mallory, attacker, mallory, alice, (running, queued))

    assert fleet.ledger.state_of(running) is JobState.RUNNING  # the attack ran while it ran
    assert fleet.ledger.state_of(queued) is JobState.QUEUED
    go.write_text("go")
    assert fleet.wait_terminal(running, timeout_s=120) is JobState.SUCCEEDED
    assert fleet.wait_terminal(queued, timeout_s=120) is JobState.SUCCEEDED
    assert {h.actor for h in fleet.ledger.history(queued)} == {alice, SERVICE}


def attack(
    fleet: Fleet, attacker: redis.Redis, mallory: str, alice: str, jobs: tuple[str, ...]
) -> None:
    """Every write and publish of the surface, asked (DRYRUN) and tried; all refused."""
    keys, prefix = fleet.ledger.keys, fleet.env["COLABQ_QUEUE_PREFIX"]
    s = surface(keys, prefix, mallory, alice, jobs)
    matrix = probes(Role.USER, s)
    pipe = fleet.ledger.r.pipeline(transaction=False)
    for p in matrix:
        pipe.execute_command("ACL", "DRYRUN", mallory, *p.argv)
    wrong = [p.argv for p, r in zip(matrix, pipe.execute(), strict=True) if allowed(r) != p.allowed]
    assert wrong == []
    live = [k for k in s.shared if fleet.ledger.r.exists(k)]
    must = {keys.job(jobs[0]), keys.log(jobs[0]), keys.jobs(), keys.active(), keys.leases(),
            f"{keys.prefix}:events", f"{prefix}gpu.t4", keys.requests(alice),
            keys.gate_lease(), f"_kombu.binding.{prefix}gpu.t4"}  # fmt: skip
    assert must <= set(live), must - set(live)
    for key in live:
        for argv in WRITES.values():
            with pytest.raises(redis.ResponseError, match=r"(?i)perm|can't access"):
                attacker.execute_command(*(a.replace("{k}", key) for a in argv))
    for channel in s.channels:
        with pytest.raises(redis.exceptions.NoPermissionError):
            attacker.publish(channel, "forged")
    with pytest.raises(redis.exceptions.NoPermissionError):  # the notifier's group on the log
        attacker.execute_command("XGROUP", "SETID", f"{keys.prefix}:events", "notifier", "$")


def refuse_requests(
    fleet: Fleet, env: dict[str, str], attacker: redis.Redis, mallory: str, alice: str,
    jobs: tuple[str, ...],
) -> None:  # fmt: skip
    """Her requests naming alice's jobs, by the CLI and forged in her own stream, and her own
    stream broken under the gate: each refused, nobody else's request delayed."""
    for argv in (["cancel", jobs[0]], ["cancel", jobs[1]],
                 ["submit", str(fleet.root / "short.sh"), "--name", "mallory-eval", "--after",
                  jobs[0], "--wall", "10m", *WAIVE]):  # fmt: skip
        res = runner.invoke(app, argv, env=env)
        assert res.exit_code == 2 and f"belongs to {alice}" in res.stderr, res.output
        assert len(res.stderr.strip().splitlines()) == 1
    keys = fleet.ledger.keys
    mine = keys.requests(mallory)
    rid = secrets.token_hex(16)
    forged = wire.Request(rid=rid, host="h", local_user=alice, body=wire.Cancel(jobs=jobs))
    attacker.xadd(mine, {"r": forged.model_dump_json()})
    attacker.xadd(mine, {"r": json.dumps({"rid": rid, "user": alice, "body": {"op": "cancel"}})})
    got = attacker.blpop([keys.reply(mallory, rid)], timeout=60)
    assert got is not None, "the gate never answered"
    result = wire.Reply.model_validate_json(got[1]).result
    assert isinstance(result, wire.Refused) and f"belongs to {alice}" in result.message
    attacker.delete(mine)  # her own stream, group and all: the gate makes it again
    attacker.set(mine, "not a stream")
    with pytest.raises(redis.exceptions.NoPermissionError):
        attacker.xadd(keys.requests(alice), {"r": forged.model_dump_json()})
    with pytest.raises(redis.exceptions.NoPermissionError):
        attacker.xgroup_destroy(keys.requests(alice), GROUP)
