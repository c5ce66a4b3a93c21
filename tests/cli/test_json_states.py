"""States in `--json` are the lowercase values of `JobState` (and of a worker's state), in
every command that reports one, while the tables show them in upper case.

Each command runs through Typer's CliRunner on the real Redis of tests/conftest.py, against a
small ledger: a queued, a running, a failed and a succeeded job (the ledger fixture is
tests/cli/conftest.py's).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from producer import exitcodes
from producer.cli import app
from tests.cli.training_repo import GOOD_NAME, make_repo
from tests.factories import make_spec
from worker.fleet import health
from worker.records.fleet import WorkerCard, publish
from worker.records.ledger import Ledger
from worker.states import JobState as S

runner = CliRunner()
OWNER = "owner-token"
UPPER = {s.name for s in S}
WORKER_STATES = {"idle", "busy", "drained"}
RUNNING = [S.ALLOCATING, S.STARTING, S.RUNNING]


def upper_states(data: Any, where: str = "") -> list[str]:
    """Where `data` (a command's JSON) names a state in upper case: a value under a key naming a
    `state` that is not lowercase, or any string that is a state's upper-case name."""
    found: list[str] = []
    if isinstance(data, dict):
        for key, value in data.items():
            at = f"{where}.{key}"
            if "state" in key and isinstance(value, str) and value != value.lower():
                found.append(f"{at}={value}")
            else:
                found += upper_states(value, at)
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found += upper_states(value, f"{where}[{i}]")
    elif isinstance(data, str) and data in UPPER:
        found.append(f"{where}={data}")
    return found


def states_in(data: Any) -> set[str]:
    """Every value under a key naming a `state`."""
    if isinstance(data, dict):
        got = {v for k, v in data.items() if "state" in k and isinstance(v, str)}
        return got.union(*(states_in(v) for v in data.values()))
    if isinstance(data, list):
        return set().union(*(states_in(v) for v in data))
    return set()


@pytest.mark.parametrize(
    ("data", "found"),
    [
        ({"state": "running"}, []),
        ({"jobs": [{"state_before": "queued", "reason": "RUNNING since noon"}]}, []),
        ({"state": "RUNNING"}, [".state=RUNNING"]),
        ({"jobs": [{"state_before": "Failed"}]}, [".jobs[0].state_before=Failed"]),
        ({"history": [{"at": 1, "was": "TIMED_OUT"}]}, [".history[0].was=TIMED_OUT"]),
    ],
)
def test_the_check_finds_an_upper_case_state(data: Any, found: list[str]) -> None:
    assert upper_states(data) == found


def job(ledger: Ledger, path: list[S], **spec: object) -> str:
    job_id, _ = ledger.create(make_spec(**spec))
    if path:
        assert ledger.claim(job_id, OWNER, ttl_s=60)
    for state in path:
        ledger.transition(job_id, state, owner=OWNER, reason=f"test: to {state.value}")
    return job_id


@pytest.fixture
def qenv(env: dict[str, str | None], key_prefix: str) -> dict[str, str | None]:
    return {**env, "COLABQ_QUEUE_PREFIX": f"{key_prefix}:q."}


@pytest.fixture
def jobs(ledger: Ledger) -> Iterator[dict[S, str]]:
    yield {
        S.QUEUED: job(ledger, []),
        S.RUNNING: job(ledger, RUNNING),
        S.FAILED: job(ledger, [*RUNNING, S.RELEASING, S.FAILED]),
        S.SUCCEEDED: job(ledger, [*RUNNING, S.PERSISTING, S.RELEASING, S.SUCCEEDED]),
    }


def run_json(argv: list[str], env: dict[str, str | None], *codes: int) -> Any:
    result = runner.invoke(app, [*argv, "--json"], env=env)
    assert result.exit_code in (codes or (0,)), result.output
    lines = result.stdout.strip().splitlines()
    data = [json.loads(line) for line in lines] if argv[0] == "logs" else json.loads(lines[-1])
    assert upper_states(data) == [], argv
    return data


def test_status_lists_lowercase_states_and_its_table_upper_case(
    jobs: dict[S, str], qenv: dict[str, str | None]
) -> None:
    data = run_json(["status"], qenv)
    assert states_in(data) == {s.value for s in jobs}
    table = runner.invoke(app, ["status"], env=qenv).stdout
    assert all(s.name in table for s in jobs), table
    assert not any(f" {s.value} " in table for s in jobs), table


@pytest.mark.parametrize("state", [S.QUEUED, S.RUNNING, S.FAILED, S.SUCCEEDED])
def test_status_of_one_job_gives_its_state_and_history_in_lowercase(
    jobs: dict[S, str], qenv: dict[str, str | None], state: S
) -> None:
    data = run_json(["status", jobs[state]], qenv, exitcodes.for_state(state))
    assert data["state"] == state.value
    assert [h["state"] for h in data["history"]][-1] == state.value
    assert state.name in runner.invoke(app, ["status", jobs[state]], env=qenv).stdout


def test_cancel_gives_the_state_before_in_lowercase(
    jobs: dict[S, str], qenv: dict[str, str | None]
) -> None:
    data = run_json(["cancel", jobs[S.QUEUED], jobs[S.FAILED]], qenv)
    before = {row["job_id"]: row["state_before"] for row in data["jobs"]}
    assert before == {jobs[S.QUEUED]: "queued", jobs[S.FAILED]: "failed"}


def test_retry_gives_the_new_jobs_state_in_lowercase(
    jobs: dict[S, str], qenv: dict[str, str | None]
) -> None:
    data = run_json(["retry", jobs[S.FAILED]], qenv)
    assert data["created"] and data["state"] == "queued"


def test_submit_gives_a_new_and_an_earlier_jobs_state_in_lowercase(
    ledger: Ledger, qenv: dict[str, str | None], tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    argv = ["submit", str(repo / "train.sh"), "--name", GOOD_NAME, "--repo-dir", str(repo),
            "--local-store", str(tmp_path / "store"), "--commit", "abc1234",
            "--seconds-per-epoch", "600"]  # fmt: skip
    (first,) = run_json(argv, qenv)["jobs"]
    assert first["created"] and first["state"] == "queued"
    assert ledger.claim(first["job_id"], OWNER, ttl_s=60)
    for state in RUNNING:
        ledger.transition(first["job_id"], state, owner=OWNER, reason="test")
    (again,) = run_json(argv, qenv)["jobs"]  # the same job, running: nothing enqueued
    assert not again["created"] and again["state"] == "running"


def test_adopt_gives_the_state_it_found_in_lowercase(
    jobs: dict[S, str], qenv: dict[str, str | None], tmp_path: Path
) -> None:
    env = {**qenv, "COLABQ_STATE_DIR": str(tmp_path / "state")}
    over = run_json(["adopt", jobs[S.FAILED]], env)
    assert over == {"job_id": jobs[S.FAILED], "adopted": False, "state": "failed",
                    "reason": "it is over"}  # fmt: skip
    live = run_json(["adopt", jobs[S.RUNNING]], env, 1)  # its owner holds the lock
    assert not live["adopted"] and live["state"] == "running"


def test_workers_give_their_state_in_lowercase_and_the_table_upper_case(
    ledger: Ledger, qenv: dict[str, str | None]
) -> None:
    now = time.time()
    for name, job_id in (("w1@h1", None), ("w2@h1", "j1"), ("w3@h1", None)):
        publish(ledger.r, ledger.keys, WorkerCard(name, "h1", ("T4",), ("gpu.t4",), job_id,
                                                  now, now))  # fmt: skip
    health.drain_by_hand(ledger.r, ledger.keys, "w3@h1", "disk swap", now, "me")
    data = run_json(["workers"], qenv)
    assert {w["name"]: w["state"] for w in data} == {
        "w1@h1": "idle", "w2@h1": "busy", "w3@h1": "drained",
    }  # fmt: skip
    assert states_in(data) <= WORKER_STATES
    table = runner.invoke(app, ["workers"], env=qenv).stdout
    assert all(word in table for word in ("IDLE", "BUSY", "DRAINED")), table
    assert not any(f" {word} " in table for word in WORKER_STATES), table


def test_logs_lines_carry_no_state_name(jobs: dict[S, str], ledger: Ledger,
                                        qenv: dict[str, str | None]) -> None:  # fmt: skip
    ledger.append_log(jobs[S.RUNNING], "epoch 1")
    rows = run_json(["logs", jobs[S.RUNNING]], qenv)
    assert rows[0]["line"] == "epoch 1" and rows[0]["stream"] == "out"
