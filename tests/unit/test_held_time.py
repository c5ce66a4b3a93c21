"""Held GPU time and compute units: the ledger's clock (`transition`, `set_fields`) over
fakeredis with a fake clock, and the rates' arithmetic (`worker.colab.rates`)."""

from __future__ import annotations

import fakeredis
import pytest

from ops.colab_emulator.backend import RATES_PER_HOUR as EMULATOR_RATES
from tests.factories import make_spec
from worker.clock import FakeClock
from worker.colab import rates
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.spec import Gpu
from worker.states import JobState as S

OWNER = "w1"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def ledger(clock: FakeClock) -> Ledger:
    return Ledger(fakeredis.FakeRedis(), clock, Keys("t"), log_maxlen=100)


def _allocating(ledger: Ledger) -> str:
    job_id, _ = ledger.create(make_spec())
    assert ledger.claim(job_id, OWNER, ttl_s=600)
    ledger.transition(job_id, S.ALLOCATING, owner=OWNER, reason="claimed")
    return job_id


def _to(ledger: Ledger, job_id: str, *states: S) -> None:
    for st in states:
        ledger.transition(job_id, st, owner=OWNER, reason=f"to {st.value}")


def _held(ledger: Ledger, job_id: str) -> float:
    return rates.held_s(ledger.get(job_id).fields, ledger.clock.time())


def test_held_time_runs_from_the_recorded_endpoint_to_the_verified_release(
    ledger: Ledger, clock: FakeClock
) -> None:
    job_id = _allocating(ledger)
    clock.advance(30)  # checks and `colab new`: nothing assigned yet, nothing held
    assert _held(ledger, job_id) == 0
    ledger.set_fields(job_id, owner=OWNER, endpoint="gpu-1")  # `colab new` returned
    clock.advance(10)
    _to(ledger, job_id, S.STARTING)
    clock.advance(100)
    _to(ledger, job_id, S.RUNNING)
    assert _held(ledger, job_id) == 110  # live: the open segment counts up to now
    clock.advance(40)
    _to(ledger, job_id, S.PERSISTING, S.RELEASING)
    clock.advance(5)
    _to(ledger, job_id, S.SUCCEEDED)
    clock.advance(1000)  # after the end nothing more is held
    rec = ledger.get(job_id)
    assert rec.get("held_since") is None
    assert float(rec.get("held_s") or 0) == 155
    assert _held(ledger, job_id) == 155


def test_the_segments_of_a_restarted_job_add_up(ledger: Ledger, clock: FakeClock) -> None:
    job_id = _allocating(ledger)
    ledger.set_fields(job_id, owner=OWNER, endpoint="gpu-1")
    clock.advance(60)
    _to(ledger, job_id, S.STARTING, S.RUNNING, S.RELEASING)
    clock.advance(5)
    _to(ledger, job_id, S.RESTARTING)  # the lost VM is verified gone: segment 1 closed
    clock.advance(300)  # waiting for a new GPU costs nothing
    _to(ledger, job_id, S.ALLOCATING)
    clock.advance(20)
    assert _held(ledger, job_id) == 65
    ledger.set_fields(job_id, owner=OWNER, endpoint="gpu-2")
    clock.advance(100)
    _to(ledger, job_id, S.STARTING, S.RUNNING, S.RELEASING)
    clock.advance(7)
    _to(ledger, job_id, S.FAILED)
    assert float(ledger.get(job_id).get("held_s") or 0) == 65 + 107


def test_an_endpoint_recorded_by_the_transition_itself_starts_the_clock(
    ledger: Ledger, clock: FakeClock
) -> None:
    job_id = _allocating(ledger)
    ledger.transition(
        job_id, S.STARTING, owner=OWNER, reason="session at gpu-1", fields={"endpoint": "gpu-1"}
    )
    clock.advance(50)
    assert _held(ledger, job_id) == 50


def test_the_endpoint_recorded_again_does_not_restart_the_clock(
    ledger: Ledger, clock: FakeClock
) -> None:
    job_id = _allocating(ledger)
    ledger.set_fields(job_id, owner=OWNER, endpoint="gpu-1")
    clock.advance(40)
    _to(ledger, job_id, S.STARTING, S.RUNNING, S.RELEASING)
    ledger.set_fields(job_id, owner=OWNER, endpoint="gpu-1")  # the release path records it too
    clock.advance(10)
    assert _held(ledger, job_id) == 50


def test_a_job_that_never_had_an_endpoint_held_nothing(ledger: Ledger, clock: FakeClock) -> None:
    job_id = _allocating(ledger)
    clock.advance(90)
    _to(ledger, job_id, S.FAILED_NO_GPU)
    rec = ledger.get(job_id)
    assert rec.get("held_s") is None and rec.get("held_since") is None
    assert _held(ledger, job_id) == 0


def test_a_job_ending_without_releasing_stops_its_clock(ledger: Ledger, clock: FakeClock) -> None:
    job_id = _allocating(ledger)
    ledger.set_fields(job_id, owner=OWNER, endpoint="gpu-1")
    clock.advance(30)
    _to(ledger, job_id, S.STARTING, S.RUNNING, S.FAILED_LOST)  # every owner lost
    clock.advance(500)
    assert _held(ledger, job_id) == 30


def test_no_clock_starts_on_an_ended_job(ledger: Ledger, clock: FakeClock) -> None:
    job_id = _allocating(ledger)
    _to(ledger, job_id, S.FAILED)
    ledger.set_fields(job_id, owner=OWNER, endpoint="gpu-late")
    clock.advance(100)
    assert ledger.get(job_id).get("held_since") is None


def test_a_replayed_transition_counts_its_segment_once(ledger: Ledger, clock: FakeClock) -> None:
    job_id = _allocating(ledger)
    ledger.set_fields(job_id, owner=OWNER, endpoint="gpu-1")
    clock.advance(20)
    _to(ledger, job_id, S.STARTING, S.RUNNING, S.RELEASING)
    ledger.transition(job_id, S.SUCCEEDED, owner=OWNER, reason="done")
    clock.advance(5)
    ledger.transition(job_id, S.SUCCEEDED, owner=OWNER, reason="done")  # a lost reply, retried
    assert float(ledger.get(job_id).get("held_s") or 0) == 20


def test_rates_agree_with_the_emulator_and_cover_every_gpu() -> None:
    assert set(rates.RATES_PER_HOUR) == {g.value for g in Gpu}
    for gpu, rate in rates.RATES_PER_HOUR.items():
        assert EMULATOR_RATES[gpu] == rate, gpu


@pytest.mark.parametrize(
    ("gpu", "held_s", "expected"),
    [
        ("T4", 3600.0, 1.76),
        ("a100", 1800.0, 11.77 / 2),
        ("H100", 0.0, 0.0),
        ("L4", -5.0, 0.0),  # a clock step backwards never makes negative units
        ("V6E1", 3600.0, None),  # a type colabq does not run
    ],
)
def test_units_are_rate_times_held_hours(gpu: str, held_s: float, expected: float | None) -> None:
    assert rates.units(gpu, held_s) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("fields", "now", "expected"),
    [
        ({}, 100.0, 0.0),
        ({"held_s": "12.5"}, 100.0, 12.5),
        ({"held_s": "10", "held_since": "90"}, 100.0, 20.0),
        ({"held_since": "150"}, 100.0, 0.0),  # a reader's clock behind the writer's
    ],
)
def test_held_s_adds_the_open_segment(
    fields: dict[str, str | None], now: float, expected: float
) -> None:
    assert rates.held_s(fields, now) == expected


def test_held_s_refuses_a_damaged_field() -> None:
    with pytest.raises(ValueError):
        rates.held_s({"held_s": "lots"}, 0.0)


def test_a_restored_record_keeps_counting_held_time_from_the_recorded_endpoint(
    ledger: Ledger, clock: FakeClock
) -> None:
    spec = make_spec()
    ledger.create(spec)
    assert ledger.claim(spec.job_id, OWNER, ttl_s=600)
    recorded_at = clock.time()
    clock.advance(100)
    ledger.r.flushall()  # Redis restarted without persistence, the session still held
    assert ledger.restore(
        spec, OWNER, S.RUNNING, 600, held_since=recorded_at, session="colabq-x", endpoint="gpu-1"
    )
    clock.advance(20)
    assert _held(ledger, spec.job_id) == pytest.approx(120)
    _to(ledger, spec.job_id, S.RELEASING, S.SUCCEEDED)
    assert _held(ledger, spec.job_id) == pytest.approx(120)


def test_a_restored_record_without_a_session_holds_nothing(
    ledger: Ledger, clock: FakeClock
) -> None:
    spec = make_spec()
    ledger.create(spec)
    ledger.r.flushall()
    assert ledger.restore(spec, OWNER, S.ALLOCATING, 600, held_since=clock.time())
    clock.advance(50)
    assert _held(ledger, spec.job_id) == 0
