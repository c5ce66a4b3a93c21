"""`colabq quota` and `colabq budget` on the real Redis: an operator sets and clears quotas, a
user may read them and change nothing (the command refuses in one line; her bare Redis client is
refused by Redis on every quota key); bad values are one line and change nothing; `quota` says
what the claim says, word for word, about a job that would start now; a damaged value read back
is shown as damaged; `budget` shows balances, burn rates and hours left from real endings."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import redis
from typer.testing import CliRunner

from producer.cli import app
from tests.cli.test_acl_users import as_user, people  # noqa: F401 (a fixture)
from tests.factories import make_spec
from worker.accounts.balances import record_usage
from worker.colab.parse import Usage
from worker.quota.limits import Scope, read_quotas, set_quota
from worker.records.claim import Claim, claim_and_start
from worker.records.ledger import Ledger
from worker.states import JobState as S

runner = CliRunner()
TEAM = "team@example.com"


def invoke(env: dict[str, str | None], *args: str) -> Any:
    return runner.invoke(app, list(args), env=env)


def test_an_operator_sets_and_clears_a_user_reads_and_redis_refuses_her_writes(
    people: dict[str, str],  # noqa: F811
    env: dict[str, str | None],
    key_prefix: str,
    ledger: Ledger,
) -> None:
    ops, alice = (as_user(env, people[w], key_prefix) for w in ("ops", "alice"))
    name = people["alice_name"]
    done = invoke(ops, "quota", "set", "--user", name, "--gpus", "2", "--units-day", "50")
    assert done.exit_code == 0, done.output
    assert f"Quota of {name}: gpus 2, units day 50" in done.stdout
    assert (
        invoke(ops, "quota", "set", "--account", TEAM.upper(), "--units-month", "300").exit_code
        == 0
    )
    shown = invoke(alice, "quota", "--json")  # she may read them
    assert shown.exit_code == 0, shown.output
    rows = {(q["kind"], q["name"]): q for q in json.loads(shown.stdout)["quotas"]}
    assert rows[("user", name)]["gpus"] == 2 and rows[("user", name)]["units_day"] == 50.0
    assert rows[("account", TEAM)]["units_month"] == 300.0
    assert rows[("user", name)]["new_job"] == "starts"

    before = ledger.r.hgetall(ledger.keys.quota_limits())
    refused = invoke(alice, "quota", "set", "--user", name, "--gpus", "9")
    assert refused.exit_code == 2 and len(refused.output.strip().splitlines()) == 1
    assert "needs an operator's Redis user" in refused.output
    assert invoke(alice, "quota", "clear", "--user", name).exit_code == 2
    bare = redis.Redis.from_url(people["alice"])
    k = ledger.keys
    for write in (
        lambda: bare.hset(k.quota_limits(), f"user|{name}|gpus", "99"),
        lambda: bare.hdel(k.quota_limits(), f"user|{name}|gpus"),
        lambda: bare.srem(k.quota_running("user", name), "x"),
        lambda: bare.hset(k.quota_spent("day", "2026-05-01"), f"user|{name}", "0"),
        lambda: bare.zadd(k.quota_ended(), {"{}": 1}),
    ):
        with pytest.raises(redis.exceptions.NoPermissionError):
            write()
    assert ledger.r.hgetall(k.quota_limits()) == before

    cleared = invoke(ops, "quota", "clear", "--user", name, "--limit", "units-day", "--json")
    assert cleared.exit_code == 0, cleared.output
    assert (
        json.loads(cleared.stdout)["gpus"] == 2 and json.loads(cleared.stdout)["units_day"] is None
    )
    assert invoke(ops, "quota", "clear", "--user", name).exit_code == 0
    assert Scope("user", name) not in read_quotas(ledger.r, k)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["set", "--user", "alice", "--gpus", "-1"], "give a number >= 0"),
        (["set", "--user", "alice", "--units-day", "nan"], "give a number >= 0"),
        (["set", "--user", "alice", "--units-week", "inf"], "give a number >= 0"),
        (["set", "--user", "alice", "--account", "t@x", "--gpus", "1"], "not both"),
        (["set", "--user", "al ice", "--gpus", "1"], "is not a user name"),
        (["set", "--account", "nobody", "--gpus", "1"], "is not an account"),
        (["set", "--user", "alice"], "Give a limit to set"),
        (["set", "--gpus", "1"], "Name whose quota"),
        (["clear", "--user", "alice", "--limit", "colour"], "--limit colour"),
        (["show", "--gpus", "1"], "takes no limit value"),
        (["raise", "--user", "alice"], "use one of show, set, clear"),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(
    args: list[str], says: str, env: dict[str, str | None], ledger: Ledger
) -> None:
    set_quota(ledger.r, ledger.keys, Scope("user", "alice"), {"gpus": 3}, time.time())
    before = ledger.r.hgetall(ledger.keys.quota_limits())
    got = invoke(env, "quota", *args)
    assert got.exit_code == 2, got.output
    assert len(got.output.strip().splitlines()) == 1 and says in got.output, got.output
    assert "Traceback" not in got.output
    assert ledger.r.hgetall(ledger.keys.quota_limits()) == before


def claim(ledger: Ledger, job_id: str, owner: str) -> Claim:
    return claim_and_start(
        ledger, job_id, owner, ttl_s=30, worker="w1", owner_host="h:/s", nonce="n",
        wall_deadline_at=time.time() + 3600, account=TEAM,
    ).claim  # fmt: skip


def run_for(ledger: Ledger, job_id: str, owner: str, held_s: float) -> None:
    """The job held its GPU for `held_s` and succeeded (its held-time clock set back)."""
    ledger.set_fields(job_id, owner=owner, endpoint=f"ep-{job_id}")
    ledger.r.hset(ledger.keys.job(job_id), "held_since", repr(time.time() - held_s))
    for state in (S.STARTING, S.RUNNING, S.RELEASING, S.SUCCEEDED):
        ledger.transition(job_id, state, owner=owner, reason=f"to {state.value}")


def test_quota_says_what_the_claim_says(env: dict[str, str | None], ledger: Ledger) -> None:
    alice = Scope("user", "alice")
    set_quota(ledger.r, ledger.keys, alice, {"gpus": 1, "units_day": 0.001}, time.time())
    ids = [ledger.create(make_spec(run_name=f"r{i}", submitted_by="alice@laptop"))[0]
           for i in range(3)]  # fmt: skip
    assert claim(ledger, ids[0], "o0") is Claim.CLAIMED
    assert claim(ledger, ids[1], "o1") is Claim.WAITING
    said = ledger.get(ids[1]).reason
    assert said == "waiting: quota alice gpus 1 of 1 running"
    shown = json.loads(invoke(env, "quota", "--json").stdout)["quotas"][0]
    assert (shown["running"], shown["waiting"], shown["new_job"]) == (1, 1, said)
    status = json.loads(invoke(env, "status", ids[1], "--json").stdout)
    assert status["reason"].startswith(said + ", next try in ")

    run_for(ledger, ids[0], "o0", 60)  # 0.029 units, over the day's 0.001
    assert claim(ledger, ids[2], "o2") is Claim.WAITING
    said = ledger.get(ids[2]).reason
    assert said.startswith("waiting: quota alice units-day 0.029") and " until " in said
    shown = json.loads(invoke(env, "quota", "--json").stdout)["quotas"][0]
    assert (shown["running"], shown["new_job"]) == (0, said)
    table = invoke(env, "quota")
    assert table.exit_code == 0 and "quota alice units-day 0.029" in table.stdout

    ledger.r.hset(ledger.keys.quota_limits(), alice.field("gpus"), "two")
    shown = json.loads(invoke(env, "quota", "--json").stdout)["quotas"][0]
    assert shown["damaged"] == {"gpus": "two"}
    assert claim(ledger, ids[2], "o2") is Claim.WAITING  # its next try is not due yet
    ledger.r.hdel(ledger.keys.job(ids[2]), "retry_at")
    assert claim(ledger, ids[2], "o2") is Claim.WAITING
    assert ledger.get(ids[2]).reason == shown["new_job"]
    assert "gpus is damaged (two)" in shown["new_job"]


def test_budget_balances_burn_rates_and_hours_left(
    env: dict[str, str | None], ledger: Ledger
) -> None:
    now = time.time()
    usage = Usage(balance_units=100.0, rate_per_hour=1.76, active_assignments=1)
    record_usage(ledger.r, ledger.keys, TEAM, usage, by="w1", now=now - 120)
    alice = Scope("user", "alice")
    set_quota(ledger.r, ledger.keys, alice, {"units_day": 10}, now)
    ended, running = (ledger.create(make_spec(run_name=f"b{i}", submitted_by="alice@laptop"))[0]
                      for i in range(2))  # fmt: skip
    assert (
        claim(ledger, ended, "o0") is Claim.CLAIMED
        and claim(ledger, running, "o1") is Claim.CLAIMED
    )
    run_for(ledger, ended, "o0", 1800)  # 0.88 units over the last half hour
    ledger.set_fields(running, owner="o1", endpoint="ep-running")
    ledger.r.hset(ledger.keys.job(running), "held_since", repr(time.time() - 7200))  # 2 h: 3.52
    got = invoke(env, "budget", "--json")
    assert got.exit_code == 0, got.output
    doc = json.loads(got.stdout)
    (team,) = doc["accounts"]
    assert team["account"] == TEAM and team["balance_units"] == 100.0 and team["running"] == 1
    assert team["burn_per_hour_1h"] == pytest.approx(0.88 + 1.76, abs=0.01)
    assert team["burn_per_hour_24h"] == pytest.approx((0.88 + 3.52) / 24, abs=0.01)
    assert team["hours_left_1h"] == pytest.approx(100 / 2.64, abs=0.2)
    (user,) = doc["users"]
    assert user["user"] == "alice" and user["running"] == 1
    assert user["used"]["day"] == pytest.approx(4.4, abs=0.01)
    assert user["units_left"] == pytest.approx(5.6, abs=0.01)
    assert user["hours_left_1h"] == pytest.approx(5.6 / 2.64, abs=0.05)
    table = invoke(env, "budget")
    assert table.exit_code == 0 and TEAM in table.stdout and "alice" in table.stdout
