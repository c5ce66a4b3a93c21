"""The tracker run's reference and ending, the ledger's queue of runs to check, a pass that reads
it in the round trips it makes anyway, and submit's choice of tracker (no tracker server here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis

from tests.factories import make_spec
from tests.tracker.conftest import end_job, running_job
from worker.errors import UserInputError
from worker.janitor.snapshot import read_snapshot
from worker.records.ledger import Ledger
from worker.states import JobState as S
from worker.tracker.runs import Ending, TrackerRef, carries_secret, ending_for, scrub


@pytest.mark.parametrize(
    "text",
    ["mlflow:0a1b2c", "wandb:alice/vision/abc123", "wandb:abc123"],
)
def test_a_reference_reads_back_as_written(text: str) -> None:
    ref = TrackerRef.parse(text)
    assert ref is not None and str(ref) == text


def test_unknown_references_are_not_guessed() -> None:
    assert TrackerRef.parse("neptune:1") is None and TrackerRef.parse("mlflow:") is None


def test_how_a_ghost_run_ends_follows_its_job() -> None:
    assert ending_for(S.SUCCEEDED) is Ending.FINISHED
    assert ending_for(S.CANCELLED) is Ending.KILLED
    for state in (S.FAILED, S.TIMED_OUT, S.FAILED_LOST, S.VM_LOST):
        assert ending_for(state) is Ending.FAILED


def test_secrets_are_scrubbed_and_secret_bearing_urls_kept_from_the_job() -> None:
    assert scrub("GET https://bob:pw@mlflow.example/api tok123", ["tok123"]) == (
        "GET https://***@mlflow.example/api ***"
    )
    assert carries_secret("https://u:p@host") and carries_secret("https://host/?token=x")
    assert not carries_secret("http://127.0.0.1:5000")


def test_an_ended_job_with_a_run_is_queued_for_the_janitor_once(ledger: Ledger) -> None:
    with_run = running_job(ledger, make_spec(tracker="mlflow"))
    ledger.set_fields(with_run.job_id, owner="w1", tracker_run="mlflow:abc")
    without = running_job(ledger)
    end_job(ledger, with_run.job_id, S.FAILED, "job exited 1")
    end_job(ledger, without.job_id, S.FAILED, "job exited 1")
    queued = [x.decode() for x in ledger.r.zrange(ledger.keys.tracker_check(), 0, -1)]
    assert queued == [with_run.job_id]
    [t] = read_snapshot(ledger).tracked
    assert (t.job_id, t.ref, t.state, t.reason) == (
        with_run.job_id, "mlflow:abc", S.FAILED, "job exited 1",
    )  # fmt: skip


def test_reading_the_runs_to_check_costs_no_extra_round_trip(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    def trips() -> int:
        count = 0
        real = redis.client.Pipeline.execute

        def counting(self: Any, *a: Any, **kw: Any) -> Any:
            nonlocal count
            count += 1
            return real(self, *a, **kw)

        with monkeypatch.context() as m:
            m.setattr(redis.client.Pipeline, "execute", counting)
            read_snapshot(ledger)
        return count

    spec = running_job(ledger)
    ledger.r.delete(ledger.keys.lock(spec.job_id))
    ledger.clock.advance(60)  # type: ignore[attr-defined]
    before = trips()
    for _ in range(20):
        job = running_job(ledger, make_spec(tracker="mlflow"))
        ledger.set_fields(job.job_id, owner="w1", tracker_run="mlflow:x")
        end_job(ledger, job.job_id, S.CANCELLED, "cancelled")
    assert len(read_snapshot(ledger).tracked) == 20
    assert trips() == before == 2


def test_submit_names_the_tracker_the_pre_flight_detects_and_its_experiment(
    tmp_path: Path,
) -> None:
    from producer.job_tracker import job_tracker

    script = tmp_path / "train.py"
    script.write_text('import mlflow\nmlflow.set_experiment("vision")\nmlflow.start_run()\n')
    assert job_tracker(None, tmp_path, script, {}) == ("mlflow", "vision")
    assert job_tracker(None, tmp_path, script, {"MLFLOW_EXPERIMENT_NAME": "env-exp"}) == (
        "mlflow", "env-exp",
    )  # fmt: skip
    wandb = tmp_path / "wb.py"
    wandb.write_text('import wandb\nwandb.init(project="coco")\n')
    assert job_tracker(None, tmp_path, wandb, {}) == ("wandb", "coco")
    assert job_tracker("none", tmp_path, wandb, {}) == (None, None)
    assert job_tracker("mlflow", tmp_path, wandb, {}) == ("mlflow", None)
    plain = tmp_path / "plain.py"
    plain.write_text("print('hi')\n")
    assert job_tracker(None, tmp_path, plain, {}) == (None, None)
    with pytest.raises(UserInputError, match="--tracker"):
        job_tracker("neptune", tmp_path, plain, {})
