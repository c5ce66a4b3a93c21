"""A train -> eval pipeline from one job file (`steps:`), on the emulator through a worker
(issue 21): eval is claimed only after train SUCCEEDED; with train failing, eval ends CANCELLED
with the reason, never claimed."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from producer.cli import app
from tests.integration.conftest import Fleet
from tests.integration.test_run_on_vm import RUN, WAIVE
from worker.states import JobState

pytestmark = pytest.mark.integration
runner = CliRunner()


def submit_pipeline(fleet: Fleet, tag: str, train: str) -> tuple[str, str]:
    (fleet.root / f"train-{tag}.sh").write_text(train)
    (fleet.root / "eval.sh").write_text("echo evaluating\n")
    job_file = fleet.root / f"pipeline-{tag}.yaml"
    job_file.write_text(
        f"script: train-{tag}.sh\nname: {RUN}-{tag}\nsteps:\n"
        f"  - {{name: {RUN}-{tag}-train}}\n"
        f"  - {{name: {RUN}-{tag}-eval, script: eval.sh}}\n"
    )
    result = runner.invoke(
        app,
        ["submit", str(job_file), "--idle", "5s", "--local-store", str(fleet.root / "store"),
         "--json", *WAIVE],
        env=fleet.env,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    first, second = (j["job_id"] for j in json.loads(result.stdout)["jobs"])
    return first, second


def test_eval_runs_after_train_succeeded_and_not_after_it_failed(fleet: Fleet) -> None:
    train, ev = submit_pipeline(fleet, "ok", "echo training\n")
    bad_train, bad_ev = submit_pipeline(fleet, "bad", "echo breaking\nexit 3\n")
    assert fleet.wait_terminal(train) is JobState.SUCCEEDED
    assert fleet.wait_terminal(ev) is JobState.SUCCEEDED
    ended = fleet.ledger.history(train)[-1].at
    claimed = next(h.at for h in fleet.ledger.history(ev) if h.state is JobState.ALLOCATING)
    assert claimed >= ended
    assert fleet.wait_terminal(bad_train) is JobState.FAILED
    assert fleet.wait_terminal(bad_ev, timeout_s=30) is JobState.CANCELLED
    rec = fleet.ledger.get(bad_ev)
    assert rec.reason == f"dependency {bad_train} ended FAILED (needed SUCCEEDED)"
    assert JobState.ALLOCATING not in {h.state for h in fleet.ledger.history(bad_ev)}
