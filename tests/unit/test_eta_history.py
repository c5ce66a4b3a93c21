"""Seconds per epoch measured from earlier runs of the same config: what counts and what not."""

from __future__ import annotations

import json

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


def test_the_measured_rate_of_a_report_comes_first_whatever_the_outcome() -> None:
    """A run's final report records the rate its console showed (`progress.epoch_s`): it beats
    RUNNING to PERSISTING (which counts start-up and the final sync), and a run stopped at its
    time limit measured it too. A report that does not parse counts as none."""
    clock = FakeClock()
    ledger = Ledger(fakeredis.FakeRedis(), clock, Keys("t"), log_maxlen=100)
    run(ledger, clock, config="configs/ref.yaml", epochs=10, run_s=1000)  # timed: 100 s/epoch
    for end, epoch_s in ((S.SUCCEEDED, 80.0), (S.TIMED_OUT, 90.0)):
        run(ledger, clock, config="configs/ref.yaml", epochs=10, run_s=5000, end=end)
        newest = ledger.list_jobs(1)[0].job_id
        report = {"progress": {"unit": "epoch", "rate_per_s": 1 / epoch_s, "epoch_s": epoch_s}}
        ledger.r.hset(ledger.keys.job(newest), "report", json.dumps(report))
    run(ledger, clock, config="configs/ref.yaml", epochs=10, run_s=7000)
    ledger.r.hset(ledger.keys.job(ledger.list_jobs(1)[0].job_id), "report", "{not json")
    assert measure_from_ledger(ledger, "configs/ref.yaml") == 85.0
    # A forged or damaged rate is no rate: the timed runs are what is left.
    for job in ledger.list_jobs(10):
        if job.get("report", "").startswith('{"progress"'):
            ledger.r.hset(ledger.keys.job(job.job_id), "report", '{"progress": {"epoch_s": -1}}')
    # (the successful runs, timed: 100, 500 and 700 s/epoch; the one stopped at its limit not)
    assert measure_from_ledger(ledger, "configs/ref.yaml") == 500.0
