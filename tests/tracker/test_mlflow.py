"""MLflow against a real `mlflow server`: the worker opens a job's run tagged with the job id,
and one janitor pass closes the runs that jobs which died left RUNNING (FAILED, KILLED, or
FINISHED for a succeeded job whose script never closed it), never one already closed, never in
a dry run, deleting only where configured. Credentials stay off Redis, logs and reports."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from producer.broker import free_port
from tests.factories import make_spec
from tests.tracker.conftest import (
    end_job,
    open_for,
    redis_dump,
    running_job,
    tracker_rows,
)
from worker.janitor.run import JanitorDeps, janitor_pass
from worker.records.ledger import Ledger
from worker.settings import Settings
from worker.states import JobState as S
from worker.store.artifacts import Verification
from worker.tracker.mlflow_runs import MlflowRuns
from worker.tracker.runs import TrackerRef, TrackerRuns

pytestmark = pytest.mark.xdist_group("mlflow")  # one server for these and the fleet test
OK = Verification(True, 0, ("logs/x/exit_code",), (), "")
TOKEN = "mlflow-canary-token-7f3a9c"


class Recording:
    """A tracker client that records every call it passes on."""

    def __init__(self, inner: TrackerRuns) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def status(self, ref: TrackerRef) -> str | None:
        self.calls.append("status")
        return self.inner.status(ref)

    def is_running(self, status: str) -> bool:
        return self.inner.is_running(status)

    def finish(self, ref: TrackerRef, ending: Any, **kw: str) -> str:
        self.calls.append(f"finish {ending}")
        return self.inner.finish(ref, ending, **kw)

    def delete(self, ref: TrackerRef) -> str:
        self.calls.append("delete")
        return self.inner.delete(ref)


def deps(ledger: Ledger, tracker: TrackerRuns, *, delete: bool = False) -> JanitorDeps:
    def nothing(*_: object) -> str:
        raise AssertionError("nothing to adopt, resend or stop here")

    return JanitorDeps(
        ledger=ledger, verify=lambda spec: OK, location=lambda spec: "store",
        account=lambda: [], stop_orphan=nothing, adopt=nothing, resend=nothing,
        queued_ids=set, trackers={"mlflow": tracker}, delete_ghosts=delete,
    )  # fmt: skip


@pytest.fixture
def settings(mlflow_uri: str, tmp_path: Path) -> Settings:
    return Settings(mlflow_tracking_uri=mlflow_uri, state_dir=tmp_path)


@pytest.fixture
def client(mlflow_uri: str) -> MlflowClient:
    return MlflowClient(tracking_uri=mlflow_uri)


def test_the_worker_opens_the_jobs_run_tagged_with_the_job_and_a_restart_reuses_it(
    ledger: Ledger, settings: Settings, client: MlflowClient, tmp_path: Path
) -> None:
    spec = running_job(ledger, make_spec(tracker="mlflow", tracker_project="vision-ghosts"))
    env = open_for(spec, ledger, settings, tmp_path)
    assert env == {
        "MLFLOW_RUN_ID": env["MLFLOW_RUN_ID"],
        "MLFLOW_TRACKING_URI": settings.mlflow_tracking_uri,
    }
    rec = ledger.get(spec.job_id)
    assert rec.get("tracker_run") == f"mlflow:{env['MLFLOW_RUN_ID']}"
    run = client.get_run(env["MLFLOW_RUN_ID"])
    assert run.info.status == "RUNNING" and run.info.run_name == spec.run_name
    assert run.data.tags["colabq.job_id"] == spec.job_id
    exp = client.get_experiment(run.info.experiment_id)
    assert exp.name == "vision-ghosts" and rec.get("tracker_experiment") == exp.experiment_id
    # A restarted segment (or an adopter) resumes the same run: no second one.
    assert open_for(spec, ledger, settings, tmp_path) == env
    assert len(client.search_runs([exp.experiment_id])) == 1
    # Without a named experiment, the settings' one (created if missing).
    other = running_job(ledger, make_spec(tracker="mlflow"))
    run2 = client.get_run(open_for(other, ledger, settings, tmp_path)["MLFLOW_RUN_ID"])
    assert client.get_experiment(run2.info.experiment_id).name == "colabq"


def test_an_unreachable_tracker_costs_one_log_line_not_the_job(
    ledger: Ledger, tmp_path: Path
) -> None:
    down = Settings(
        mlflow_tracking_uri=f"http://127.0.0.1:{free_port()}", state_dir=tmp_path,
        tracker_timeout_s=2,
    )  # fmt: skip
    spec = running_job(ledger, make_spec(tracker="mlflow"))
    assert open_for(spec, ledger, down, tmp_path) == {}
    lines = [x.text for x in ledger.read_log(spec.job_id)]
    assert len(lines) == 1 and "no run opened" in lines[0], lines
    assert ledger.get(spec.job_id).get("tracker_run") is None
    assert ledger.get(spec.job_id).state is S.RUNNING


def _ended_job_with_run(
    ledger: Ledger, settings: Settings, tmp_path: Path, state: S, reason: str
) -> tuple[str, str]:
    spec = running_job(ledger, make_spec(tracker="mlflow"))
    run_id = open_for(spec, ledger, settings, tmp_path)["MLFLOW_RUN_ID"]
    end_job(ledger, spec.job_id, state, reason)
    return spec.job_id, run_id


def test_one_pass_closes_the_runs_jobs_left_running_and_only_those(
    ledger: Ledger, settings: Settings, client: MlflowClient, tmp_path: Path
) -> None:
    failed = _ended_job_with_run(ledger, settings, tmp_path, S.TIMED_OUT, "wall cap 3600s reached")
    cancelled = _ended_job_with_run(ledger, settings, tmp_path, S.CANCELLED, "cancelled: stop")
    closed = _ended_job_with_run(ledger, settings, tmp_path, S.FAILED, "job exited 1")
    client.set_terminated(closed[1], "FAILED")  # the job's own MLflow closed it
    unclosed = _ended_job_with_run(ledger, settings, tmp_path, S.SUCCEEDED, "exit 0")
    tracker = Recording(MlflowRuns.from_settings(settings))

    report = janitor_pass(deps(ledger, tracker), dry_run=False)

    for (job_id, run_id), status, state in (
        (failed, "FAILED", "TIMED_OUT"), (cancelled, "KILLED", "CANCELLED"),
        (unclosed, "FINISHED", "SUCCEEDED"),
    ):  # fmt: skip
        run = client.get_run(run_id)
        assert run.info.status == status and run.info.end_time, (state, run.info)
        assert run.data.tags["colabq.state"] == state
        assert run.data.tags["colabq.reason"] == ledger.get(job_id).reason
        row = tracker_rows(report)[f"mlflow:{run_id}"]
        assert row.did == f"did: finish {status}" and "still RUNNING" in row.why
    kept = client.get_run(closed[1])
    assert kept.info.status == "FAILED" and "colabq.state" not in kept.data.tags
    assert tracker_rows(report)[f"mlflow:{closed[1]}"].did == "left alone"
    assert ledger.r.zcard(ledger.keys.tracker_check()) == 0  # each run is checked once
    tracker.calls.clear()
    again = janitor_pass(deps(ledger, tracker), dry_run=False)
    assert tracker.calls == [] and tracker_rows(again) == {}


def test_a_run_left_running_by_a_killed_job_is_failed_or_killed_after_one_pass(
    ledger: Ledger, settings: Settings, client: MlflowClient, tmp_path: Path
) -> None:
    """The host of two jobs is killed mid-run (owners SIGKILLed); their watchdogs stopped the
    VMs. One janitor pass settles both jobs and closes their runs: no second pass needed."""
    killed = running_job(ledger, make_spec(tracker="mlflow"))
    stopped = running_job(ledger, make_spec(tracker="mlflow"))
    runs = {
        s.job_id: open_for(s, ledger, settings, tmp_path)["MLFLOW_RUN_ID"]
        for s in (killed, stopped)
    }
    for spec in (killed, stopped):
        ledger.record_watch(spec.job_id, {"gone_verified_at": "1", "exec_exit": "137"})
        ledger.r.delete(ledger.keys.lock(spec.job_id))  # the owner is gone: its lease lapses
    ledger.request_cancel(stopped.job_id, "stop it")
    ledger.clock.advance(60)  # type: ignore[attr-defined]
    assert client.get_run(runs[killed.job_id]).info.status == "RUNNING"

    report = janitor_pass(deps(ledger, MlflowRuns.from_settings(settings)), dry_run=False)

    assert ledger.get(killed.job_id).state is S.FAILED
    assert ledger.get(stopped.job_id).state is S.CANCELLED
    run = client.get_run(runs[killed.job_id])
    assert run.info.status == "FAILED" and "exited 137" in run.data.tags["colabq.reason"]
    assert client.get_run(runs[stopped.job_id]).info.status == "KILLED"
    assert {r.did for r in tracker_rows(report).values()} == {
        "did: finish FAILED",
        "did: finish KILLED",
    }


def test_a_dry_run_asks_the_tracker_nothing_and_changes_nothing(
    ledger: Ledger, settings: Settings, client: MlflowClient, tmp_path: Path
) -> None:
    job_id, run_id = _ended_job_with_run(ledger, settings, tmp_path, S.FAILED, "job exited 2")
    tracker = Recording(MlflowRuns.from_settings(settings))
    report = janitor_pass(deps(ledger, tracker), dry_run=True)
    assert tracker.calls == []
    assert tracker_rows(report)[f"mlflow:{run_id}"].did.startswith("would: finish FAILED")
    assert client.get_run(run_id).info.status == "RUNNING"
    assert ledger.r.zscore(ledger.keys.tracker_check(), job_id) is not None


def test_ghosts_are_deleted_only_where_configured(
    ledger: Ledger, settings: Settings, client: MlflowClient, tmp_path: Path
) -> None:
    _, run_id = _ended_job_with_run(ledger, settings, tmp_path, S.FAILED_LOST, "owner died")
    report = janitor_pass(
        deps(ledger, MlflowRuns.from_settings(settings), delete=True), dry_run=False
    )
    assert tracker_rows(report)[f"mlflow:{run_id}"].did == "did: finish FAILED; delete"
    run = client.get_run(run_id)
    assert run.info.lifecycle_stage == "deleted" and run.info.status == "FAILED"


def test_a_run_not_tagged_with_its_job_is_never_touched(
    ledger: Ledger, settings: Settings, client: MlflowClient, tmp_path: Path
) -> None:
    spec = running_job(ledger, make_spec(tracker="mlflow"))
    exp = client.get_experiment_by_name("colabq") or client.get_experiment(
        client.create_experiment("colabq")
    )
    foreign = client.create_run(exp.experiment_id).info.run_id  # somebody else's run
    ledger.set_fields(spec.job_id, owner="w1", tracker_run=f"mlflow:{foreign}")
    end_job(ledger, spec.job_id, S.FAILED, "job exited 1")
    report = janitor_pass(deps(ledger, MlflowRuns.from_settings(settings)), dry_run=False)
    assert client.get_run(foreign).info.status == "RUNNING"
    row = tracker_rows(report)[f"mlflow:{foreign}"]
    assert row.did == "failed: check" and "not tagged" in row.why


def test_the_token_stays_off_redis_the_job_log_the_report_and_the_environment(
    ledger: Ledger, mlflow_uri: str, client: MlflowClient, tmp_path: Path
) -> None:
    token_file = tmp_path / "mlflow-token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    settings = Settings(
        mlflow_tracking_uri=mlflow_uri, mlflow_token_file=token_file, state_dir=tmp_path
    )
    spec = running_job(ledger, make_spec(tracker="mlflow"))
    env = open_for(spec, ledger, settings, tmp_path)
    assert TOKEN not in repr(env)
    # And an unreachable server with the token configured: its error names no token either.
    down = settings.model_copy(update={"mlflow_tracking_uri": f"http://127.0.0.1:{free_port()}"})
    other = running_job(ledger, make_spec(tracker="mlflow"))
    assert open_for(other, ledger, down, tmp_path) == {}
    end_job(ledger, spec.job_id, S.FAILED, "job exited 1")
    report = janitor_pass(deps(ledger, MlflowRuns.from_settings(settings)), dry_run=False)
    assert client.get_run(env["MLFLOW_RUN_ID"]).info.status == "FAILED"
    assert os.environ.get("MLFLOW_TRACKING_TOKEN") != TOKEN  # scoped to each call, then restored
    for text in (redis_dump(ledger), repr(report.to_json()), "\n".join(report.lines())):
        assert TOKEN not in text
    log = [x.text for j in (spec.job_id, other.job_id) for x in ledger.read_log(j)]
    assert log and not any(TOKEN in line for line in log)
