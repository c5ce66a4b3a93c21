"""`colabq cancel` of several jobs at once: several ids, `--run GLOB`, `--state queued --mine`;
one `--json` shape however many; nothing named is one line, exit 2. Through CliRunner on the
real Redis: each selected job is cancelled (or its runner asked to), the others untouched."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from producer.cli import app
from producer.joblist import whoami
from tests.factories import make_spec
from worker.records.ledger import Ledger
from worker.states import JobState

runner = CliRunner()
OWNER = "owner-token"


def queued(ledger: Ledger, run: str = "mnist-mlp-bs64-lr1e-3-baseline", by: str = "") -> str:
    job_id, _ = ledger.create(make_spec(run_name=run, submitted_by=by or whoami()))
    return job_id


def running(ledger: Ledger, run: str) -> str:
    job_id = queued(ledger, run)
    assert ledger.claim(job_id, OWNER, ttl_s=60)
    for state in (JobState.ALLOCATING, JobState.STARTING, JobState.RUNNING):
        ledger.transition(job_id, state, owner=OWNER, reason="test")
    return job_id


def cancel(env: dict[str, str | None], *args: str) -> list[dict[str, str]]:
    result = runner.invoke(app, ["cancel", *args, "--json"], env=env)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["count"] == len(data["jobs"])
    return list(data["jobs"])


def test_several_ids_at_once(ledger: Ledger, env: dict[str, str | None]) -> None:
    a, b, c = queued(ledger), queued(ledger), queued(ledger)
    got = cancel(env, a, b[:8])
    assert [(j["job_id"], j["result"]) for j in got] == [(a, "cancelled"), (b, "cancelled")]
    assert ledger.get(c).state is JobState.QUEUED


def test_run_glob_cancels_the_live_jobs_of_a_sweep(
    ledger: Ledger, env: dict[str, str | None]
) -> None:
    sweep = [queued(ledger, f"coco-detr-lr{lr}") for lr in ("1e-4", "3e-4")]
    busy = running(ledger, "coco-detr-lr1e-3")
    other = queued(ledger, "mnist-mlp-baseline")
    got = {j["job_id"]: j["result"] for j in cancel(env, "--run", "coco-detr-*")}
    assert got == {sweep[0]: "cancelled", sweep[1]: "cancelled", busy: "requested"}
    assert ledger.cancel_requested(busy) and ledger.get(other).state is JobState.QUEUED


def test_state_queued_mine_leaves_running_and_others_jobs(
    ledger: Ledger, env: dict[str, str | None]
) -> None:
    mine = queued(ledger)
    theirs = queued(ledger, by="alice@elsewhere")
    busy = running(ledger, "mnist-mlp-busy")
    got = cancel(env, "--state", "queued", "--mine")
    assert [j["job_id"] for j in got] == [mine]
    assert ledger.get(theirs).state is JobState.QUEUED and not ledger.cancel_requested(busy)


def test_nothing_matching_says_so(ledger: Ledger, env: dict[str, str | None]) -> None:
    queued(ledger)
    result = runner.invoke(app, ["cancel", "--run", "nope-*"], env=env)
    assert result.exit_code == 0 and "No job matches; nothing cancelled." in result.stdout


def test_naming_nothing_is_one_line_exit_2(env: dict[str, str | None]) -> None:
    result = runner.invoke(app, ["cancel"], env=env)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and "--run GLOB" in lines[0], result.output
