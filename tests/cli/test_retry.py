"""`colabq retry JOB`: a job that ended without success submitted again in one step, as a new job
linked to it (shown by `status`); a live or succeeded job is refused in one line. Through
Typer's CliRunner on the real Redis of tests/conftest.py."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from producer.cli import app
from tests.factories import make_spec
from worker.records.ledger import Ledger
from worker.states import JobState

runner = CliRunner()
OWNER = "owner-token"


@pytest.fixture
def gate_queue_prefix(key_prefix: str) -> str:
    # The new job's message goes to a queue under the test's key prefix (cleaned with it).
    return f"{key_prefix}:q."


@pytest.fixture
def qenv(env: dict[str, str | None], gate_queue_prefix: str) -> dict[str, str | None]:
    return {**env, "COLABQ_QUEUE_PREFIX": gate_queue_prefix}


def ended(ledger: Ledger, *states: JobState) -> str:
    job_id, _ = ledger.create(make_spec())
    assert ledger.claim(job_id, OWNER, ttl_s=60)
    for state in states:
        ledger.transition(job_id, state, owner=OWNER, reason=f"test: {state.value}")
    return job_id


def test_retry_submits_a_failed_jobs_spec_again_as_a_linked_job(
    ledger: Ledger, qenv: dict[str, str | None]
) -> None:
    old = ended(ledger, JobState.FAILED)
    result = runner.invoke(app, ["retry", old[:6], "--json"], env=qenv)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    new = data["job_id"]
    assert data["created"] and data["retry_of"] == old and new != old
    rec, before = ledger.get(new), ledger.get(old)
    assert rec.state is JobState.QUEUED and rec.get("retry_of") == old
    assert before.get("retried_as") == new
    exact = {"job_id", "submitted_at", "submitted_from", "submitted_by"}
    assert rec.spec.model_dump(exclude=exact) == before.spec.model_dump(exclude=exact)
    assert ledger.r.llen(f"{qenv['COLABQ_QUEUE_PREFIX']}gpu.t4") == 1  # its message was sent
    shown = runner.invoke(app, ["status", new], env=qenv)
    assert any("retry of" in ln and old in ln for ln in shown.stdout.splitlines()), shown.stdout
    shown_json = json.loads(runner.invoke(app, ["status", new, "--json"], env=qenv).stdout)
    assert shown_json["retry_of"] == old


def test_retry_twice_yields_the_first_retry(ledger: Ledger, qenv: dict[str, str | None]) -> None:
    old = ended(ledger, JobState.ALLOCATING, JobState.FAILED_NO_GPU)
    first = runner.invoke(app, ["retry", old], env=qenv)
    assert first.exit_code == 0 and "submitted again as job" in first.stdout, first.output
    second = runner.invoke(app, ["retry", old, "--json"], env=qenv)
    data = json.loads(second.stdout)
    assert not data["created"] and data["job_id"] == ledger.get(old).get("retried_as")


@pytest.mark.parametrize(
    ("states", "word"),
    [((JobState.ALLOCATING,), "not over"), ((JobState.ALLOCATING, JobState.STARTING), "not over")],
)
def test_retry_of_a_live_job_is_one_line_exit_2(
    ledger: Ledger, qenv: dict[str, str | None], states: tuple[JobState, ...], word: str
) -> None:
    job_id = ended(ledger, *states)
    result = runner.invoke(app, ["retry", job_id], env=qenv)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and word in lines[0], result.output
    assert ledger.get(job_id).get("retried_as") is None


def test_retry_of_a_succeeded_job_is_refused(ledger: Ledger, qenv: dict[str, str | None]) -> None:
    path = [JobState.ALLOCATING, JobState.STARTING, JobState.RUNNING, JobState.PERSISTING]
    job_id = ended(ledger, *path, JobState.RELEASING, JobState.SUCCEEDED)
    result = runner.invoke(app, ["retry", job_id], env=qenv)
    assert result.exit_code == 2 and "SUCCEEDED: nothing to retry" in result.stderr
