"""A deployment under Redis ACLs, end to end: the worker runs as a service user (its gate duty
too: it lists the users with ACL USERS), alice submits as a user (her own rule, on the fleet's
prefixes: she writes only her request), the job runs and succeeds, and its history names alice
for the submission and the service for every step the worker took."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from producer.cli import app
from tests.integration.aclfleet import (  # noqa: F401 (fixtures)
    SERVICE,
    fleet_env_extra,
    login,
    make_user,
    users,
)
from tests.integration.conftest import Fleet
from worker.people.owners import owner_of
from worker.states import JobState

pytestmark = pytest.mark.integration
runner = CliRunner()


def test_a_users_job_runs_on_a_service_worker_and_its_history_names_both(
    fleet: Fleet,
    redis_url: str,
    users: list[str],  # noqa: F811
) -> None:
    alice = make_user(fleet, users, "alice")
    script = fleet.root / "job.sh"
    script.write_text("echo 'epoch 1 loss=0.5'\n")
    submitted = runner.invoke(
        app,
        ["submit", str(script), "--name", "mnist-mlp-bs64-lr1e-3-acl", "--wall", "10m",
         "--local-store", str(fleet.root / "store"), "--json",
         "--waive", "config-diff", "--waive", "paths", "--waive", "monitoring"],
        env={**fleet.env, "COLABQ_REDIS_URL": login(redis_url, alice)},
    )  # fmt: skip
    assert submitted.exit_code == 0, submitted.output
    job_id = json.loads(submitted.stdout)["jobs"][0]["job_id"]
    assert owner_of(job_id) == alice
    assert fleet.wait_terminal(job_id) is JobState.SUCCEEDED, fleet.ledger.get(job_id).reason
    history = fleet.ledger.history(job_id)
    assert history[0].actor == alice
    assert {h.actor for h in history[1:]} == {SERVICE}, history
