"""A sweep as one unit (issue 21): the creation script records the sweep's id on each point and
indexes its points; `status --sweep ID` lists them, `cancel --sweep ID` cancels every point not
over, and an unknown sweep is one line. Through CliRunner on the real Redis (private prefix)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from producer.cli import app
from producer.joblist import whoami
from tests.factories import make_spec
from worker.flow.sweeps import SweepTag, new_sweep_id, points_of
from worker.records.ledger import Ledger
from worker.states import JobState

runner = CliRunner()
OWNER = "owner-token"


def sweep_of(ledger: Ledger, n: int) -> tuple[str, list[str]]:
    sweep = new_sweep_id(None)
    specs = [make_spec(run_name=f"coco-lr{i}", submitted_by=whoami()) for i in range(n)]
    created = ledger.create_many(specs, sweep=SweepTag(sweep, 2))
    return sweep, [job_id for job_id, _ in created]


def test_each_point_names_its_sweep_and_the_sweep_lists_them(ledger: Ledger) -> None:
    sweep, ids = sweep_of(ledger, 3)
    assert points_of(ledger.r, ledger.keys, sweep) == ids
    assert all(ledger.get(i).get("sweep") == sweep for i in ids)
    assert points_of(ledger.r, ledger.keys, new_sweep_id(None)) == []
    single, _ = ledger.create(make_spec(run_name="alone"))
    assert ledger.get(single).get("sweep") is None


def test_status_and_cancel_by_sweep(ledger: Ledger, env: dict[str, str | None]) -> None:
    sweep, ids = sweep_of(ledger, 3)
    _, others = sweep_of(ledger, 1)
    assert ledger.claim(ids[0], OWNER, ttl_s=60)
    ledger.transition(ids[0], JobState.ALLOCATING, owner=OWNER, reason="test")
    ledger.transition(ids[2], JobState.CANCELLED, owner="", reason="test")
    shown = runner.invoke(app, ["status", "--sweep", sweep, "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    doc = json.loads(shown.stdout)
    assert [j["job_id"] for j in doc["jobs"]] == ids and doc["max_parallel"] == 2
    assert doc["states"] == {"ALLOCATING": 1, "QUEUED": 1, "CANCELLED": 1}
    text = runner.invoke(app, ["status", "--sweep", sweep], env=env)
    assert f"Sweep {sweep}: 3 point(s)" in text.stdout
    done = runner.invoke(app, ["cancel", "--sweep", sweep, "--json"], env=env)
    assert done.exit_code == 0, done.output
    got = {j["job_id"]: j["result"] for j in json.loads(done.stdout)["jobs"]}
    assert got == {ids[0]: "requested", ids[1]: "cancelled"}
    assert ledger.get(others[0]).state is JobState.QUEUED


def test_an_unknown_sweep_is_one_line(env: dict[str, str | None]) -> None:
    for cmd in ("status", "cancel"):
        result = runner.invoke(app, [cmd, "--sweep", "swnothing"], env=env)
        assert result.exit_code == 2, result.output
        assert "No sweep 'swnothing'" in result.output
        assert "Traceback" not in result.output
