"""`colabq usage` against the real Redis: each account's balance as its hosts last saw it (with
its age), its burn rate over the period, and the compute units by job and by user, from the
same held time as the jobs' reports; jobs before the period are left out."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import redis
from typer.testing import CliRunner

from producer.cli import app
from tests.factories import make_spec
from worker.accounts.balances import record_usage
from worker.clock import FakeClock
from worker.colab.parse import Usage
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.states import JobState as S

runner = CliRunner()


@pytest.fixture
def ledger(redis_client: redis.Redis, key_prefix: str) -> Iterator[Ledger]:
    # Two hours ago: each job holds its GPU for an hour of this clock.
    yield Ledger(redis_client, FakeClock(time.time() - 7200), Keys(key_prefix), log_maxlen=100)
    for key in redis_client.scan_iter(f"{key_prefix}:*"):
        redis_client.delete(key)


def run_for_an_hour(ledger: Ledger, user: str, account: str | None, gpu: str = "T4") -> str:
    job_id, _ = ledger.create(make_spec(submitted_by=user, gpu=gpu))
    assert ledger.claim(job_id, "w1", ttl_s=60)
    ledger.transition(job_id, S.ALLOCATING, owner="w1", reason="claimed")
    fields = {"account": account} if account else {}
    ledger.set_fields(job_id, owner="w1", endpoint=f"gpu-{job_id}", **fields)
    ledger.clock.advance(3600)  # type: ignore[attr-defined]
    ledger.transition(job_id, S.RELEASING, owner="w1", reason="done")
    ledger.transition(job_id, S.SUCCEEDED, owner="w1", reason="released")
    return job_id


def test_usage_by_account_job_and_user(ledger: Ledger, env: dict[str, str | None]) -> None:
    old, _ = ledger.create(make_spec(submitted_by="alice@h1"))
    ledger.r.zadd(ledger.keys.jobs(), {old: time.time() - 30 * 86400})  # before the period
    a1 = run_for_an_hour(ledger, "alice@h1", "a@x.org")
    a2 = run_for_an_hour(ledger, "bob@h2", "a@x.org", gpu="A100")
    b1 = run_for_an_hour(ledger, "alice@h1", "b@x.org")
    record_usage(ledger.r, ledger.keys, "a@x.org", Usage(80.0, 0.0, 0), by="w-a",
                 now=time.time() - 120)  # fmt: skip
    record_usage(ledger.r, ledger.keys, "c@x.org", Usage(3.5, 0.0, 0), by="w-c", now=time.time())
    result = runner.invoke(app, ["usage", "--since", "1d", "--json"], env=env)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    accounts = {a["account"]: a for a in data["accounts"]}
    assert set(accounts) == {"a@x.org", "b@x.org", "c@x.org"}
    a = accounts["a@x.org"]
    assert (a["jobs"], a["units"]) == (2, round(1.76 + 11.77, 4))
    assert a["burn_per_hour"] == pytest.approx((1.76 + 11.77) / 24, rel=1e-3)
    assert a["balance_units"] == 80.0 and 115 <= a["balance_age_s"] <= 180
    assert accounts["b@x.org"]["balance_units"] is None  # no host of it recorded one
    assert (accounts["c@x.org"]["jobs"], accounts["c@x.org"]["balance_units"]) == (0, 3.5)
    jobs = {j["job_id"]: j for j in data["jobs"]}
    assert set(jobs) == {a1, a2, b1}
    assert jobs[a2]["units"] == 11.77 and jobs[a2]["account"] == "a@x.org"
    # The same units as the job's report would say (held time x the GPU's rate).
    assert jobs[a1]["held_s"] == 3600.0 and jobs[a1]["units"] == 1.76
    users = {u["user"]: u for u in data["users"]}
    assert users["alice@h1"] == {"user": "alice@h1", "units": 3.52, "jobs": 2,
                                 "accounts": ["a@x.org", "b@x.org"]}  # fmt: skip
    assert users["bob@h2"]["units"] == 11.77

    text = runner.invoke(app, ["usage", "--since", "1d"], env=env)
    assert text.exit_code == 0, text.output
    assert "a@x.org" in text.stdout and "80.00" in text.stdout and "ago (w-a)" in text.stdout
    assert "never" in text.stdout  # b's balance: no host of it recorded one


def test_a_bad_period_is_one_line(env: dict[str, str | None]) -> None:
    result = runner.invoke(app, ["usage", "--since", "last tuesday"], env=env)
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert "--since 'last tuesday' is neither a duration" in result.output
