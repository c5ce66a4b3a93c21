"""A deployment under Redis ACLs, end to end: the worker runs as a service user (its gate duty
too: it lists the users with ACL USERS), alice submits as a user (her own rule, on the fleet's
prefixes: she writes only her request), the job runs and succeeds, and its history names alice
for the submission and the service for every step the worker took."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator

import pytest
import redis
from typer.testing import CliRunner

from producer.cli import app
from tests.integration.conftest import Fleet
from worker.people.acl import Role, rules_for
from worker.people.owners import owner_of
from worker.states import JobState

pytestmark = pytest.mark.integration
runner = CliRunner()
PASSWORD = "pw-" + secrets.token_hex(8)
TAG = secrets.token_hex(3)


def login(redis_url: str, user: str) -> str:
    where = redis_url.split("://", 1)[1].rsplit("@", 1)[-1]  # host:port/db, without a login
    return f"redis://{user}:{PASSWORD}@{where}"


@pytest.fixture
def users(redis_url: str) -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    admin = redis.Redis.from_url(redis_url)
    for name in made:
        admin.execute_command("ACL", "DELUSER", name)


@pytest.fixture
def fleet_env_extra(redis_url: str, users: list[str]) -> dict[str, str]:
    """The worker logs in as a service user (its rule does not depend on the prefixes)."""
    name = f"workers-{TAG}"
    rules = rules_for(name, Role.SERVICE, "any", "")
    redis.Redis.from_url(redis_url).execute_command(
        "ACL", "SETUSER", name, "on", f">{PASSWORD}", *rules
    )
    users.append(name)
    return {"COLABQ_REDIS_URL": login(redis_url, name)}


def test_a_users_job_runs_on_a_service_worker_and_its_history_names_both(
    fleet: Fleet, redis_url: str, users: list[str]
) -> None:
    alice = f"alice-{TAG}"
    rules = rules_for(alice, Role.USER, fleet.ledger.keys.prefix, fleet.env["COLABQ_QUEUE_PREFIX"])
    fleet.ledger.r.execute_command("ACL", "SETUSER", alice, "on", f">{PASSWORD}", *rules)
    users.append(alice)
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
    assert {h.actor for h in history[1:]} == {f"workers-{TAG}"}, history
