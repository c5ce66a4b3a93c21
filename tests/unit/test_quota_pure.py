"""The quotas' pure parts: the periods in a time zone (ISO weeks, months, a year's turn, a
23-hour day at a daylight-saving change), the numbers the reasons print (the same in Lua and in
Python), the Python twin of the claim's decision, the limits read back, and the budget's burn
arithmetic (only the part of a job's held time inside the window counts)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
import redis

from producer.budget import _inside, build_budget, hours_left
from worker.accounts.balances import Balance
from worker.flow.slots import BACKSTOP_S
from worker.quota.check import ScopeUse, find_wait, fmt_units, units_left
from worker.quota.claim import QUOTA_BASE
from worker.quota.limits import Quota, Scope, job_quota_user, parse_quotas
from worker.quota.periods import periods_at, zone
from worker.quota.read import Ending, Live


def at(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()  # type: ignore[misc]


@pytest.mark.parametrize(
    ("now", "tz", "ids", "ends"),
    [
        (at(2026, 5, 1, 12), "UTC", ("2026-05-01", "2026-W18", "2026-05"),
         (at(2026, 5, 2), at(2026, 5, 4), at(2026, 6, 1))),
        # 23:59 on Dec 31 in UTC is already Jan 1 in Tokyo (+9): a new day, week 1, new month.
        (at(2026, 12, 31, 23, 59), "UTC", ("2026-12-31", "2026-W53", "2026-12"),
         (at(2027, 1, 1), at(2027, 1, 4), at(2027, 1, 1))),
        (at(2026, 12, 31, 23, 59), "Asia/Tokyo", ("2027-01-01", "2026-W53", "2027-01"),
         (at(2027, 1, 1, 15), at(2027, 1, 3, 15), at(2027, 1, 31, 15))),
        # Paris springs forward on 2026-03-29: that day is 23 hours long.
        (at(2026, 3, 29, 12), "Europe/Paris", ("2026-03-29", "2026-W13", "2026-03"),
         (at(2026, 3, 29, 22), at(2026, 3, 29, 22), at(2026, 3, 31, 22))),
    ],
)  # fmt: skip
def test_periods(now: float, tz: str, ids: tuple[str, ...], ends: tuple[float, ...]) -> None:
    got = periods_at(now, tz)
    assert tuple(p.period_id for p in got) == ids
    assert tuple(p.end_at for p in got) == ends
    assert all(p.start_at <= now < p.end_at for p in got)


def test_a_daylight_saving_day_is_23_hours_and_a_bad_zone_one_line() -> None:
    day = periods_at(at(2026, 3, 29, 12), "Europe/Paris")[0]
    assert day.end_at - day.start_at == 23 * 3600
    assert day.end_text == "2026-03-30 00:00 Europe/Paris"
    with pytest.raises(ValueError, match="not a time zone"):
        zone("Mars/Olympus")


NUMBERS = [0.0, 0.004123, 0.0147, 0.01, 0.5, 1.0, 2.0, 50.0, 50.234, 1234.5, 1e-7, 12345.678]


def test_numbers_print_the_same_in_lua_and_python(redis_client: redis.Redis) -> None:
    script = QUOTA_BASE + "\nreturn q_fmt(tonumber(ARGV[1]))"
    lua = [redis_client.eval(script, 0, repr(x)).decode() for x in NUMBERS]
    assert lua == [fmt_units(x) for x in NUMBERS]
    assert fmt_units(50.0) == "50" and fmt_units(0.0147) == "0.0147" and fmt_units(2.5) == "2.5"


@pytest.mark.parametrize(
    ("job_id", "submitted_by", "user"),
    [("ab12.alice", "bob@x", "alice"), ("ab12", "bob@laptop", "bob"), ("ab12", "", ""),
     ("ab12", "two words@x", ""), ("ab12", "John.Doe@x", "John.Doe")],
)  # fmt: skip
def test_whose_quota_a_job_counts_against(job_id: str, submitted_by: str, user: str) -> None:
    assert job_quota_user(job_id, submitted_by) == user


def test_limits_read_back_are_checked() -> None:
    raw = {b"user|alice|gpus": b"2", b"user|alice|units_day": b"nan", b"user|bob|gpus": b"1.5",
           b"account|t@x|units_month": b"300", b"user|carol|color": b"red", b"junk": b"1",
           b"user||gpus": b"1"}  # fmt: skip
    got = parse_quotas(raw)
    assert set(got) == {Scope("user", "alice"), Scope("user", "bob"), Scope("account", "t@x")}
    assert got[Scope("user", "alice")].limits == {"gpus": 2.0}
    assert got[Scope("user", "alice")].damaged == {"units_day": "nan"}
    assert got[Scope("user", "bob")].damaged == {"gpus": "1.5"}
    assert got[Scope("account", "t@x")].limits == {"units_month": 300.0}


def test_find_wait_says_what_the_claim_says() -> None:
    now = at(2026, 5, 1, 12)
    periods = periods_at(now, "UTC")
    alice = Quota(Scope("user", "alice"), {"gpus": 2, "units_day": 10, "units_month": 100})
    assert find_wait(alice, ScopeUse(1, 3.0, {"day": 6.0}), periods, now) is None
    full = find_wait(alice, ScopeUse(2), periods, now)
    assert full is not None and full.reason == "waiting: quota alice gpus 2 of 2 running"
    assert full.retry_at == now + BACKSTOP_S
    spent = find_wait(alice, ScopeUse(1, 4.5, {"day": 6.0}), periods, now)
    assert spent is not None and spent.retry_at == at(2026, 5, 2)
    assert (
        spent.reason == "waiting: quota alice units-day 10.5 of 10 used, until 2026-05-02 00:00 UTC"
    )
    team = Quota(Scope("account", "t@x"), {"units_day": 1})
    waits = find_wait(team, ScopeUse(0, 0.0, {"day": math.inf}), periods, now)
    assert waits is not None and waits.retry_at == now + BACKSTOP_S  # an account's: backstop
    assert waits.reason.startswith("waiting: quota account t@x units-day inf of 1 used")
    assert units_left(alice, ScopeUse(1, 4.5, {"day": 6.0, "month": 95.0})) == 0.0
    assert units_left(alice, ScopeUse(0, 0.0, {"day": 2.0, "month": 95.0})) == 5.0
    assert units_left(Quota(Scope("user", "x"), {"gpus": 1}), ScopeUse()) is None


def test_only_the_part_of_a_job_inside_the_window_counts() -> None:
    now = 100_000.0
    assert _inside(10.0, 36_000, now, now, 3600) == pytest.approx(1.0)  # 10 h, ended now
    assert _inside(2.0, 1800, now - 600, now, 3600) == pytest.approx(2.0)  # all inside
    assert _inside(2.0, 1800, now - 3600 - 900, now, 3600) == pytest.approx(0.0)  # before it
    assert _inside(2.0, 1800, now - 3600 + 900, now, 3600) == pytest.approx(1.0)  # half
    assert _inside(2.0, 0, now - 10, now, 3600) == 2.0 and _inside(0.0, 10, now, now, 3600) == 0
    assert hours_left(10.0, 2.0) == 5.0 and hours_left(10.0, 0.0) is None
    assert hours_left(None, 2.0) is None


def test_the_budget_of_an_account_and_its_users() -> None:
    now = 200_000.0
    endings = [Ending("j1", "alice", "t@x", 1800, 0.88, now - 60)]
    live = [Live("j2", "alice", "t@x", 7200, 3.52), Live("j3", "bob", "t@x", 600, 0.29)]
    balances = {"t@x": Balance("t@x", 100.0, 1.76, 1, now - 300, "w1")}
    alice = Scope("user", "alice")
    quotas = {alice: Quota(alice, {"units_day": 10})}
    uses = {alice: ScopeUse(1, 3.52, {"day": 0.88})}
    got = build_budget(balances, quotas, uses, endings, live, now)
    (team,) = got.accounts
    assert team.burn_1h == pytest.approx(0.88 + 1.76 + 0.29)
    assert team.burn_24h == pytest.approx((0.88 + 3.52 + 0.29) / 24)
    row = team.to_json(now)
    assert row["balance_units"] == 100.0 and row["balance_age_s"] == 300.0
    assert row["hours_left_1h"] == round(100.0 / (0.88 + 1.76 + 0.29), 2)
    a, b = got.users
    assert (a.name, a.left_units, a.running) == ("alice", pytest.approx(10 - 4.4), 1)
    assert a.to_json(now)["hours_left_1h"] == round((10 - 4.4) / (0.88 + 1.76), 2)
    assert (b.name, b.left_units, b.running) == ("bob", None, 1)
    assert b.to_json(now)["hours_left_1h"] is None and b.burn_1h == pytest.approx(0.29)
