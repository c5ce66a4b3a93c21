"""Sweeps and dependencies under Redis ACL users (issues 21 and 26), through the gate: a user's
sweep id names its owner (its keys are the gate's to write, never in her namespace); another
user's `cancel --sweep` is refused in one line; an operator cancels every point; a job after one
of them is made due by its dependency's end; an unknown --after is one line."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from producer.cli import app
from tests.cli.aclpeople import as_user, gate_queue_prefix, gate_settings_extra, people  # noqa: F401
from worker.people.owners import owner_of
from worker.records.ledger import Ledger
from worker.states import JobState

runner = CliRunner()
WAIVE = ["--waive", "config-diff", "--waive", "paths", "--waive", "monitoring"]


def test_a_users_sweep_and_its_dependant_under_acls(
    people: dict[str, str],  # noqa: F811
    env: dict[str, str | None], key_prefix: str, ledger: Ledger, tmp_path: Path,
) -> None:  # fmt: skip
    script = tmp_path / "train.sh"
    script.write_text("echo hi\n")
    (tmp_path / "store").mkdir()
    alice = as_user(env, people["alice"], key_prefix)
    common = ["--local-store", str(tmp_path / "store"), "--commit", "abc1234", "--json", *WAIVE]
    swept = runner.invoke(
        app,
        ["submit", str(script), "--name", "mnist-acl-{env.X}", "--sweep", "env.X=1,2",
         "--max-parallel", "1", *common],
        env=alice,
    )  # fmt: skip
    assert swept.exit_code == 0, swept.output
    doc = json.loads(swept.stdout)
    sweep, points = doc["sweep"], [j["job_id"] for j in doc["jobs"]]
    assert owner_of(sweep) == people["alice_name"]
    assert ledger.r.exists(f"{key_prefix}:sweep:{sweep}:jobs")
    assert not list(ledger.r.scan_iter(f"{key_prefix}:u:{people['alice_name']}:sweep*"))
    after = runner.invoke(
        app, ["submit", str(script), "--name", "mnist-acl-eval", "--after", points[0], *common],
        env=alice,
    )  # fmt: skip
    assert after.exit_code == 0, after.output
    dependant = json.loads(after.stdout)["jobs"][0]["job_id"]
    assert ledger.get(dependant).get("after") == f"{points[0]}:ok"
    unknown = runner.invoke(
        app, ["submit", str(script), "--name", "x-eval", "--after", "ffffffff", *common], env=alice
    )
    assert unknown.exit_code == 2 and "--after ffffffff: no such job" in unknown.output

    bob = as_user(env, people["bob"], key_prefix)
    refused = runner.invoke(app, ["cancel", "--sweep", sweep], env=bob)
    assert refused.exit_code == 2 and "belongs to" in refused.output, refused.output
    assert len(refused.output.strip().splitlines()) == 1

    ops = as_user(env, people["ops"], key_prefix)
    done = runner.invoke(app, ["cancel", "--sweep", sweep, "--json"], env=ops)
    assert done.exit_code == 0, done.output
    assert {j["result"] for j in json.loads(done.stdout)["jobs"]} == {"cancelled"}
    assert [ledger.get(p).state for p in points] == [JobState.CANCELLED] * 2
    assert ledger.get(dependant).get("retry_at") is not None  # made due by its dependency's end
