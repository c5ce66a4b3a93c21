"""`colabq preflight` measures seconds per epoch from earlier colabq runs of the reference config
(in the ledger) when the user gives none; with no such run the ETA is SKIP, not a guess."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from producer.cli import app
from tests.cli.training_repo import GOOD_NAME, QUIET_ENV, make_repo
from tests.factories import make_spec
from worker.clock import FakeClock
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.states import JobState as S


@pytest.fixture
def ledger(redis_client: redis.Redis, key_prefix: str) -> Iterator[tuple[Ledger, FakeClock]]:
    clock = FakeClock()
    yield Ledger(redis_client, clock, Keys(key_prefix), log_maxlen=100), clock
    for key in redis_client.scan_iter(f"{key_prefix}:*"):
        redis_client.delete(key)


def earlier_run(ledger: Ledger, clock: FakeClock, config: str, epochs: float, run_s: float) -> None:
    spec = make_spec(config=config, epochs=epochs)
    ledger.create(spec)
    ledger.claim(spec.job_id, "o", ttl_s=30)
    for state in (S.ALLOCATING, S.STARTING, S.RUNNING, S.PERSISTING, S.RELEASING, S.SUCCEEDED):
        ledger.transition(spec.job_id, state, owner="o", reason=state.value)
        clock.advance(run_s if state is S.RUNNING else 1)


def eta(tmp_path: Path, redis_url: str, key_prefix: str) -> dict:
    repo = make_repo(tmp_path / "repo")
    env = {**QUIET_ENV, "COLABQ_REDIS_URL": redis_url, "COLABQ_KEY_PREFIX": key_prefix,
           "HOME": str(tmp_path), "WANDB_API_KEY": "x", "WANDB_PROJECT": "coco-detr"}  # fmt: skip
    result = CliRunner().invoke(
        app,
        ["preflight", "--repo-dir", str(repo), "--name", GOOD_NAME, "--config",
         "configs/detr/intended.yaml", "--reference", "configs/detr/baseline.yaml", "--json"],
        env=env,
    )  # fmt: skip
    data = json.loads(result.output)
    return next(f for f in data["findings"] if f["check"] == "eta")


def test_eta_measured_from_earlier_runs_of_the_reference(
    ledger: tuple[Ledger, FakeClock], tmp_path: Path, redis_url: str, key_prefix: str
) -> None:
    led, clock = ledger
    earlier_run(led, clock, "configs/detr/baseline.yaml", epochs=3, run_s=3 * 600)
    found = eta(tmp_path, redis_url, key_prefix)
    assert found["verdict"] == "pass", found
    assert "measured from earlier runs" in found["saw"] and "0.5" in found["saw"]


def test_no_earlier_run_means_skip(
    ledger: tuple[Ledger, FakeClock], tmp_path: Path, redis_url: str, key_prefix: str
) -> None:
    led, clock = ledger
    earlier_run(led, clock, "configs/detr/other.yaml", epochs=3, run_s=3 * 600)
    found = eta(tmp_path, redis_url, key_prefix)
    assert found["verdict"] == "skip", found


def test_eta_takes_the_rate_an_earlier_runs_report_measured(
    ledger: tuple[Ledger, FakeClock], tmp_path: Path, redis_url: str, key_prefix: str
) -> None:
    """The earlier run's final report recorded its rate from its console (`progress.epoch_s`):
    that beats its RUNNING-to-PERSISTING time (600 s/epoch here, start-up and all)."""
    led, clock = ledger
    earlier_run(led, clock, "configs/detr/baseline.yaml", epochs=3, run_s=3 * 600)
    job_id = led.list_jobs(1)[0].job_id
    progress = {"unit": "it", "rate_per_s": 2.5, "total": 9000, "epoch_s": 1200.0}
    led.r.hset(led.keys.job(job_id), "report", json.dumps({"progress": progress}))
    found = eta(tmp_path, redis_url, key_prefix)
    assert "x 1200 s (measured from earlier runs)" in found["saw"], found
