"""`colabq cancel` of a job no live runner holds, on the real Redis: a job that holds no session
ends CANCELLED at once whatever its owner field says (a claimant that died, a claim that never
ran); a job whose lock is held, or that may hold a session, is only flagged."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from producer.cli import app
from tests.factories import make_spec
from worker.records.ledger import Ledger
from worker.states import JobState as S

runner = CliRunner()


def _job(ledger: Ledger, *, state: S, owner: str, lock: bool, endpoint: str = "",
         watch_endpoint: str = "") -> str:  # fmt: skip
    job_id, _ = ledger.create(make_spec())
    if owner:
        assert ledger.claim(job_id, owner, ttl_s=60)
        if state is S.ALLOCATING:
            ledger.transition(job_id, S.ALLOCATING, owner=owner, reason="claimed")
        if endpoint:
            ledger.set_fields(job_id, owner=owner, endpoint=endpoint, session="colabq-x")
        if not lock:
            ledger.release_lock(job_id, owner)  # the claimant died (or its claim never ran)
    if watch_endpoint:
        ledger.record_watch(job_id, {"endpoint": watch_endpoint})
    return job_id


CASES = [
    ("queued, never claimed: ends now", S.QUEUED, "", False, "", "", True),
    ("queued, claimant gone: ends now", S.QUEUED, "w1", False, "", "", True),
    ("queued, claimant live: flagged", S.QUEUED, "w1", True, "", "", False),
    ("allocating, owner gone, no endpoint: ends now", S.ALLOCATING, "w1", False, "", "", True),
    ("allocating, owner live: flagged", S.ALLOCATING, "w1", True, "", "", False),
    ("allocating, owner gone, endpoint recorded: left to the adopter", S.ALLOCATING, "w1",
     False, "gpu-1", "", False),
    ("allocating, owner gone, its watchdog saw an endpoint: left to it", S.ALLOCATING, "w1",
     False, "", "gpu-2", False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "state", "owner", "lock", "endpoint", "watch_endpoint", "ends"),
    CASES,
    ids=[c[0] for c in CASES],
)
def test_cancel_ends_at_once_only_what_no_live_runner_holds_and_holds_no_session(
    ledger: Ledger, case: str, state: S, owner: str, lock: bool, endpoint: str,
    watch_endpoint: str, ends: bool,
) -> None:  # fmt: skip
    job_id = _job(ledger, state=state, owner=owner, lock=lock, endpoint=endpoint,
                  watch_endpoint=watch_endpoint)  # fmt: skip
    assert ledger.get(job_id).state is state
    assert ledger.cancel(job_id, "not needed") is ends
    rec = ledger.get(job_id)
    assert ledger.cancel_requested(job_id) == "not needed"
    if ends:
        assert rec.state is S.CANCELLED and rec.reason == "not needed"
        assert not ledger.r.exists(ledger.keys.lock(job_id))  # the canceller let go of it
        assert not ledger.r.sismember(ledger.keys.active(), job_id)
    else:
        assert rec.state is state
        assert rec.owner == owner  # untouched: whoever holds or adopts it acts on the flag
        assert bool(ledger.r.exists(ledger.keys.lock(job_id))) is lock


def test_a_claim_after_the_cancel_finds_the_job_over(ledger: Ledger) -> None:
    job_id = _job(ledger, state=S.QUEUED, owner="w1", lock=False)
    assert ledger.cancel(job_id, "stop")
    # A late message for it: the claim's lock is free, but the job is no longer its to take.
    assert not ledger.claim(job_id, "w2", ttl_s=60)
    assert ledger.get(job_id).state is S.CANCELLED


def test_cli_cancel_of_a_job_whose_claimant_died(
    ledger: Ledger, env: dict[str, str | None]
) -> None:
    job_id = _job(ledger, state=S.QUEUED, owner="dead-claimant", lock=False)
    result = runner.invoke(app, ["cancel", job_id, "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["jobs"] == [{
        "job_id": job_id, "state_before": "queued", "result": "cancelled",
    }]  # fmt: skip
    assert ledger.get(job_id).state is S.CANCELLED
    live = _job(ledger, state=S.ALLOCATING, owner="w1", lock=True)
    result = runner.invoke(app, ["cancel", live], env=env)
    assert result.exit_code == 0, result.output
    assert "Cancel requested" in result.stdout and ledger.get(live).state is S.ALLOCATING
