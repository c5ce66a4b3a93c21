"""Seconds per epoch measured from earlier runs of the same config: what counts and what not."""

from __future__ import annotations

import fakeredis

from producer.eta_history import measure_from_ledger
from tests.factories import make_spec
from worker.clock import FakeClock
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.states import JobState as S

PATH = [S.ALLOCATING, S.STARTING, S.RUNNING, S.PERSISTING, S.RELEASING]


def run(ledger: Ledger, clock: FakeClock, *, config: str, epochs: float | None, run_s: float,
        end: S = S.SUCCEEDED) -> None:  # fmt: skip
    spec = make_spec(config=config, epochs=epochs)
    ledger.create(spec)
    ledger.claim(spec.job_id, "o", ttl_s=30)
    for state in PATH:
        ledger.transition(spec.job_id, state, owner="o", reason=state.value)
        clock.advance(run_s if state is S.RUNNING else 5)
    ledger.transition(spec.job_id, end, owner="o", reason="end")


def test_median_of_successful_runs_of_that_config() -> None:
    clock = FakeClock()
    ledger = Ledger(fakeredis.FakeRedis(), clock, Keys("t"), log_maxlen=100)
    run(ledger, clock, config="configs/ref.yaml", epochs=10, run_s=1000)  # 100 s/epoch
    run(ledger, clock, config="configs/ref.yaml", epochs=10, run_s=1200)  # 120 s/epoch
    run(ledger, clock, config="configs/ref.yaml", epochs=5, run_s=400)  # 80 s/epoch
    run(ledger, clock, config="configs/other.yaml", epochs=10, run_s=99_000)  # not this config
    run(ledger, clock, config="configs/ref.yaml", epochs=10, run_s=5, end=S.FAILED)  # failed
    run(ledger, clock, config="configs/ref.yaml", epochs=None, run_s=7)  # epochs unknown
    assert measure_from_ledger(ledger, "configs/ref.yaml") == 100.0


def test_no_earlier_run_is_not_measured() -> None:
    clock = FakeClock()
    ledger = Ledger(fakeredis.FakeRedis(), clock, Keys("t"), log_maxlen=100)
    run(ledger, clock, config="configs/other.yaml", epochs=10, run_s=1000)
    assert measure_from_ledger(ledger, "configs/ref.yaml") is None
