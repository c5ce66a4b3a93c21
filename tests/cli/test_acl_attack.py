"""Bob, a user of a shared deployment, attacks it with a real Redis client and the rules `colabq
acl` prints (issue 26); alice is the victim, an operator and the gate look on:

- Redis refuses every write command family (SET, HSET, DEL, RENAME, LPUSH, ZREM, SREM, XADD,
  XGROUP, EVAL) on every shared key, and every publish on Celery's channels: an `ACL DRYRUN`
  matrix over the surface built from `worker/records/keys.py` (every key the services write, a
  sweep's and a job's dependants keys, the event log), Celery's queues, kombu's bindings and
  Celery's event channels, then the same writes tried for real on alice's live keys, each
  refused and each key unchanged;
- his requests naming her job or her sweep (cancel, retry, cancel --sweep, --after, the Python
  API's cancel) are refused in one line and change nothing;
- `colabq acl --check` (the operator's) finds no difference, and one line per key for a user
  left with the rule of issue 20.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from colabq import Client
from producer.cli import app
from tests.cli.aclpeople import (  # noqa: F401 (fixtures)
    as_user,
    gate_queue_prefix,
    gate_settings_extra,
    people,
    queue_prefix_of,
)
from worker.errors import UserInputError
from worker.people.acl import Role
from worker.people.aclcheck import allowed
from worker.people.surface import WRITES, probes, surface
from worker.records.ledger import Ledger
from worker.settings import load_settings
from worker.states import JobState

runner = CliRunner()
WAIVE = ["--waive", "config-diff", "--waive", "paths", "--waive", "monitoring"]


def test_redis_refuses_every_write_of_a_user_on_every_shared_key_and_channel(
    people: dict[str, str],  # noqa: F811
    redis_client: redis.Redis, ledger: Ledger, key_prefix: str,
) -> None:  # fmt: skip
    bob, alice = people["bob_name"], people["alice_name"]
    s = surface(ledger.keys, queue_prefix_of(key_prefix), bob, alice)
    assert len(s.shared) > 80 and f"{key_prefix}:u:{alice}:requests" in s.shared
    wrong = []
    pipe = redis_client.pipeline(transaction=False)
    matrix = probes(Role.USER, s)
    for p in matrix:
        pipe.execute_command("ACL", "DRYRUN", bob, *p.argv)
    for p, reply in zip(matrix, pipe.execute(raise_on_error=False), strict=True):
        if allowed(reply) != p.allowed:
            wrong.append((p.argv, reply))
    assert wrong == [], wrong[:10]
    refused = [p for p in matrix if not p.allowed]
    assert len(refused) >= len(s.shared) * len(WRITES)  # the matrix was run, not skipped


def submit(env: dict[str, str | None], script: Path, *args: str) -> dict[str, object]:
    res = runner.invoke(
        app, ["submit", str(script), "--local-store", str(script.parent / "store"), "--commit",
              "abc1234", "--json", *WAIVE, *args], env=env,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    return dict(json.loads(res.stdout))


@pytest.fixture
def victim(
    people: dict[str, str],  # noqa: F811
    env: dict[str, str | None], key_prefix: str, tmp_path: Path, ledger: Ledger,
) -> dict[str, str]:  # fmt: skip
    """Alice's live keys: a job, a sweep of two (one ended FAILED), her requests stream."""
    script = tmp_path / "train.sh"
    script.write_text("echo hi\n")
    (tmp_path / "store").mkdir()
    alice = as_user(env, people["alice"], key_prefix)
    job = submit(alice, script, "--name", "victim-job")["jobs"][0]["job_id"]  # type: ignore[index]
    doc = submit(alice, script, "--name", "victim-{env.X}", "--sweep", "env.X=1,2")
    points = [j["job_id"] for j in doc["jobs"]]  # type: ignore[attr-defined]
    ledger.transition(points[1], JobState.CANCELLED, owner="", reason="test: ended")
    return {"job": job, "sweep": str(doc["sweep"]), "point": points[0], "ended": points[1]}


def test_every_write_tried_for_real_is_refused_and_changes_nothing(
    people: dict[str, str],  # noqa: F811
    victim: dict[str, str], redis_client: redis.Redis, ledger: Ledger, key_prefix: str,
) -> None:  # fmt: skip
    bob, alice = people["bob_name"], people["alice_name"]
    jobs = (victim["job"], victim["point"], victim["ended"])
    s = surface(ledger.keys, queue_prefix_of(key_prefix), bob, alice, jobs, (victim["sweep"],))
    live = [k for k in s.shared if redis_client.exists(k)]
    k = ledger.keys
    must = {k.job(victim["job"]), k.history(victim["job"]), k.jobs(), k.active(),
            k.live_destinations(), f"{key_prefix}:events", f"{key_prefix}:sweep:{victim['sweep']}",
            f"{queue_prefix_of(key_prefix)}gpu.t4", k.requests(alice), k.gate_lease()}  # fmt: skip
    assert must <= set(live), must - set(live)
    before = {k: redis_client.dump(k) for k in live}
    attacker = redis.Redis.from_url(people["bob"])
    tries = [tuple(a.replace("{k}", key) for a in argv) for key in live for argv in WRITES.values()]
    tries += [("EVAL", "return redis.call('DEL', ARGV[1])", "0", key) for key in live]
    for argv in tries:
        with pytest.raises(redis.ResponseError, match=r"(?i)perm|can't access"):
            attacker.execute_command(*argv)
    for channel in s.channels:
        with pytest.raises(redis.exceptions.NoPermissionError):
            attacker.publish(channel, "forged")
    assert {k: redis_client.dump(k) for k in live} == before


def test_requests_naming_another_users_job_or_sweep_are_refused_in_one_line(
    people: dict[str, str],  # noqa: F811
    victim: dict[str, str], env: dict[str, str | None], key_prefix: str, ledger: Ledger,
    tmp_path: Path, redis_url: str,
) -> None:  # fmt: skip
    alice, bob = people["alice_name"], as_user(env, people["bob"], key_prefix)
    before = {j: ledger.state_of(j) for j in (victim["job"], victim["point"], victim["ended"])}
    count = ledger.r.zcard(ledger.keys.jobs())
    attempts = {
        "cancel": ["cancel", victim["job"]],
        "retry": ["retry", victim["ended"]],
        "cancel --sweep": ["cancel", "--sweep", victim["sweep"]],
        "--after": ["submit", str(tmp_path / "train.sh"), "--name", "bob-eval", "--after",
                    victim["job"], "--local-store", str(tmp_path / "store"), "--commit",
                    "abc1234", *WAIVE],
    }  # fmt: skip
    for what, argv in attempts.items():
        res = runner.invoke(app, argv, env=bob)
        assert res.exit_code == 2, (what, res.output)
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.output, what
        assert f"belongs to {alice}" in res.stderr, (what, res.output)
        assert "colabq pre-flight" not in res.stdout, what  # refused before any check ran
    settings = load_settings(redis_url=people["bob"], key_prefix=key_prefix,
                             queue_prefix=queue_prefix_of(key_prefix))  # fmt: skip
    with Client(settings=settings) as client, pytest.raises(UserInputError, match="belongs to"):
        client.cancel(victim["job"])
    assert {j: ledger.state_of(j) for j in before} == before
    assert ledger.r.zcard(ledger.keys.jobs()) == count
    assert ledger.cancel_requested(victim["job"]) is None


def test_acl_check_finds_no_difference_and_one_line_per_key_for_an_old_rule(
    people: dict[str, str],  # noqa: F811
    env: dict[str, str | None], key_prefix: str, redis_client: redis.Redis,
) -> None:  # fmt: skip
    ops, bob = (as_user(env, people[who], key_prefix) for who in ("ops", "bob"))
    clean = runner.invoke(app, ["acl", "--check", "--json"], env=ops)
    assert clean.exit_code == 0, clean.output
    doc = json.loads(clean.stdout)
    roles = {u["user"]: u["role"] for u in doc["users"]}
    assert roles == {people["alice_name"]: "user", people["bob_name"]: "user",
                     people["ops_name"]: "operator"}  # fmt: skip
    assert doc["differences"] == 0
    refused = runner.invoke(app, ["acl", "--check"], env=bob)
    assert refused.exit_code == 2 and "operator" in refused.output, refused.output
    legacy = f"legacy-{people['bob_name']}"
    p = key_prefix
    old = ["resetkeys", "resetchannels", f"%R~{p}:*", f"~{p}:job:*.{legacy}", f"~{p}:jobs",
           f"~{p}:active", f"~{queue_prefix_of(p)}gpu.*", "&/*celeryev*", "+@all", "-@admin",
           "-@dangerous", "+acl|whoami"]  # fmt: skip
    redis_client.execute_command("ACL", "SETUSER", legacy, "on", "nopass", *old)
    try:
        found = runner.invoke(app, ["acl", "--check"], env=ops)
    finally:
        redis_client.execute_command("ACL", "DELUSER", legacy)
    assert found.exit_code == 1, found.output
    lines = [ln for ln in found.stdout.splitlines() if ln.startswith(f"{legacy} (user)")]
    for what in (f"'{p}:jobs'", f"'{p}:active'", f"'{queue_prefix_of(p)}gpu.t4'",
                 f"'{p}:job:0123456789abcdef.{legacy}'", "'/0.celeryev/task.multi'"):  # fmt: skip
        assert sum(what in ln for ln in lines) == 1, (what, found.stdout)
    assert not [ln for ln in found.stdout.splitlines() if ln.startswith(people["bob_name"])]
