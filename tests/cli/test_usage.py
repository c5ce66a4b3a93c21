"""`colabq usage` against the real Redis: each account's balance as its hosts last saw it (with
its age), its burn rate over the period, and the compute units by job and by user, from the
same held time as the jobs' reports; jobs before the period are left out. `--by`: per user,
account, GPU type and day, the totals are the sums of the jobs' final reports (a running job's
live figure, as `status` shows it), rounded to the cent only when shown."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator

import pytest
import redis
from typer.testing import CliRunner

from producer.cli import app
from tests.factories import make_spec
from worker.accounts.balances import record_usage
from worker.clock import FakeClock
from worker.colab import rates
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


def finish_with_report(ledger: Ledger, user: str, account: str, gpu: str, held: float) -> str:
    """A job that held `gpu` for `held` seconds, ended as a runner ends it: its report computed
    in RELEASING (`rates.costs`, as `Finishing._costs`), recorded with the terminal transition
    a moment later (so the record's held time differs a little from the report's)."""
    job_id, _ = ledger.create(make_spec(submitted_by=user, gpu=gpu))
    assert ledger.claim(job_id, "w1", ttl_s=60)
    ledger.transition(job_id, S.ALLOCATING, owner="w1", reason="claimed")
    ledger.set_fields(job_id, owner="w1", endpoint=f"gpu-{job_id}", account=account)
    ledger.clock.advance(held - 0.3)  # type: ignore[attr-defined]
    ledger.transition(job_id, S.RELEASING, owner="w1", reason="releasing")
    ledger.clock.advance(0.3)  # type: ignore[attr-defined]
    rec = ledger.get(job_id)
    report = rates.costs(rec.get("gpu") or gpu, rec.created_at, rec.fields, ledger.clock.time())
    ledger.clock.advance(0.4)  # type: ignore[attr-defined]
    fields = {"report": json.dumps(report), "outcome": "succeeded"}
    ledger.transition(job_id, S.SUCCEEDED, owner="w1", reason="done", fields=fields)
    return job_id


# (user, account, gpu, held seconds) per day, three days apart from each other.
DAYS = [
    [("alice@h1", "a@x.org", "T4", 1000.0), ("bob@h2", "a@x.org", "A100", 1234.0),
     ("alice@h1", "b@x.org", "L4", 29.5)],
    [("carol@h3", "b@x.org", "T4", 29.5), ("alice@h1", "a@x.org", "H100", 777.0)],
    [("bob@h2", "b@x.org", "T4", 29.5), ("carol@h3", "a@x.org", "A100", 3600.0)],
]  # fmt: skip


def test_usage_by_group_totals_equal_the_reports(
    redis_client: redis.Redis, key_prefix: str, env: dict[str, str | None]
) -> None:
    ledger = Ledger(redis_client, FakeClock(time.time() - 3 * 86400), Keys(key_prefix),
                    log_maxlen=100)  # fmt: skip
    try:
        ended: list[str] = []
        for day in DAYS:
            ended += [finish_with_report(ledger, *job) for job in day]
            ledger.clock.advance(86400)  # type: ignore[attr-defined]
        # One still running (the clock an hour behind): its live figure, as status shows it.
        ledger.clock.advance(time.time() - 3600 - ledger.clock.time())  # type: ignore[attr-defined]
        live, _ = ledger.create(make_spec(submitted_by="dave@h4", gpu="T4"))
        assert ledger.claim(live, "w1", ttl_s=60)
        ledger.transition(live, S.ALLOCATING, owner="w1", reason="claimed")
        ledger.set_fields(live, owner="w1", endpoint=f"gpu-{live}", account="a@x.org")
        check_groups(ledger, env, ended, live)
    finally:
        for key in redis_client.scan_iter(f"{key_prefix}:*"):
            redis_client.delete(key)


def check_groups(ledger: Ledger, env: dict[str, str | None], ended: list[str], live: str) -> None:
    recs = {j: ledger.get(j) for j in ended}
    reports = {j: json.loads(r.get("report") or "") for j, r in recs.items()}
    units = {j: rep["compute_units"]["units"] for j, rep in reports.items()}
    held = {j: rep["duration"]["held_s"] for j, rep in reports.items()}
    # The record's held time is not the report's: the report's figures are the ones counted.
    assert all(rates.held_s(recs[j].fields, 0) != held[j] for j in ended)
    # Rounding each job first would be off by a cent: only the total is rounded.
    assert round(math.fsum(units.values()), 2) != round(sum(round(u, 2) for u in units.values()), 2)
    for by in ("user", "account", "gpu", "day"):
        result = runner.invoke(app, ["usage", "--since", "7d", "--by", by, "--json"], env=env)
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        jobs = {j["job_id"]: j for j in data["jobs"]}
        assert set(jobs) == {*ended, live}
        assert jobs[live]["source"] == "live" and {jobs[j]["source"] for j in ended} == {"report"}
        live_units = jobs[live]["units"]
        assert live_units == pytest.approx(rates.units("T4", 3600), rel=0.01)
        key = {j: jobs[j][by] for j in ended}
        if by == "day":
            assert len(set(key.values())) == 3
        groups = {g[by]: g for g in data["groups"]}
        for name, g in groups.items():
            mine = [j for j in ended if key[j] == name]
            extra = 1 if jobs[live][by] == name else 0
            assert (g["jobs"], g["running"]) == (len(mine) + extra, extra)
            assert g["units"] == round(
                math.fsum([units[j] for j in mine] + [live_units] * extra), 2
            )
            if not extra:
                assert g["gpu_hours"] == round(math.fsum(held[j] for j in mine) / 3600, 2)
        total = data["total"]
        assert total["jobs"] == len(ended) + 1 and total["running"] == 1
        assert total["units"] == round(math.fsum([*units.values(), live_units]), 2)
        assert total["gpu_hours"] == round(
            math.fsum([*held.values(), jobs[live]["held_s"]]) / 3600, 2
        )
    status = runner.invoke(app, ["status", live, "--json"], env=env)
    assert json.loads(status.stdout)["cu"] == pytest.approx(live_units, rel=1e-3)

    text = runner.invoke(app, ["usage", "--by", "gpu"], env=env)
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    a100 = [j for j in ended if recs[j].get("gpu") == "A100"]
    row = next(line for line in lines if "A100" in line).split()
    assert f"{round(math.fsum(held[j] for j in a100) / 3600, 2):.2f}" in row
    assert f"{round(math.fsum(units[j] for j in a100), 2):.2f}" in row
    assert "8 (1 running)" in next(line for line in lines if "total" in line)
    assert "1 job(s) still running" in text.stdout
    bad = runner.invoke(app, ["usage", "--by", "week"], env=env)
    assert bad.exit_code == 2 and bad.output.count("\n") == 1, bad.output
