"""People under Redis ACLs (issues 20 and 26), on the real Redis with ACL users made for the test
(unique names, deleted afterwards) with the rules `colabq acl` prints, on the test's key and
queue prefixes, and the gate (the test's, as the `default` service): alice submits through the
CLI as herself; bob's `colabq cancel` of her job is refused in one line (exit 2), and his writes
through his own bare redis-py connection are refused by Redis (NOPERM), as are alice's own to her
job's record: users write only their requests; an operator's cancel ends it; the history names
who did what, from which host. Without ACLs nothing changes (the rest of the suite runs as the
`default` user)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from producer.cli import app
from tests.cli.aclpeople import (  # noqa: F401 (fixtures)
    as_user,
    gate_queue_prefix,
    gate_settings_extra,
    people,
)
from worker.metrics.ended import read_ended
from worker.people.owners import owner_of
from worker.records.ledger import Ledger
from worker.states import JobState

runner = CliRunner()


def test_only_the_owner_or_an_operator_cancels_a_job_and_redis_refuses_the_rest(
    people: dict[str, str],  # noqa: F811
    env: dict[str, str | None], key_prefix: str, ledger: Ledger, tmp_path: Path,
) -> None:  # fmt: skip
    script = tmp_path / "train.sh"
    script.write_text("echo hi\n")
    (tmp_path / "store").mkdir()
    alice = as_user(env, people["alice"], key_prefix)
    store = str(tmp_path / "store")
    submitted = runner.invoke(
        app,
        ["submit", str(script), "--name", "mnist-mlp-acl-alice", "--local-store", store,
         "--commit", "abc1234", "--json",
         "--waive", "config-diff", "--waive", "paths", "--waive", "monitoring"],
        env={**alice, "LOGNAME": people["bob_name"], "USER": people["bob_name"]},
    )  # fmt: skip
    assert submitted.exit_code == 0, submitted.output
    job_id = json.loads(submitted.stdout)["jobs"][0]["job_id"]
    # Redis said who she is; the environment's name counts for nothing.
    assert owner_of(job_id) == people["alice_name"]
    assert ledger.get(job_id).spec.submitted_by == people["alice_name"]
    assert ledger.r.llen(f"{key_prefix}:q.gpu.t4") == 1  # her message went to the GPU queue

    bob = as_user(env, people["bob"], key_prefix)
    refused = runner.invoke(app, ["cancel", job_id[:8]], env=bob)
    assert refused.exit_code == 2, refused.output
    assert len(refused.output.strip().splitlines()) == 1, refused.output
    assert "belongs to" in refused.output and people["alice_name"] in refused.output
    assert ledger.get(job_id).state is JobState.QUEUED

    for who in ("bob", "alice"):  # not even her own record: her requests are the gate's to do
        bare = redis.Redis.from_url(people[who])
        for write in (
            lambda: bare.set(ledger.keys.cancel(job_id), "mallory was here"),  # noqa: B023
            lambda: bare.hset(ledger.keys.job(job_id), "state", "cancelled"),  # noqa: B023
            lambda: bare.rpush(ledger.keys.history(job_id), "{}"),  # noqa: B023
            lambda: bare.delete(ledger.keys.log(job_id)),  # noqa: B023
            lambda: bare.lpush(f"{key_prefix}:q.gpu.t4", "{}"),  # noqa: B023
        ):
            with pytest.raises(redis.exceptions.NoPermissionError):
                write()
        assert bare.hget(ledger.keys.job(job_id), "state") == b"queued"  # they may read it all
    assert ledger.cancel_requested(job_id) is None

    done = runner.invoke(
        app, ["cancel", job_id, "--json"], env=as_user(env, people["ops"], key_prefix)
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["jobs"][0]["result"] == "cancelled"
    assert ledger.get(job_id).state is JobState.CANCELLED

    history = ledger.history(job_id)
    host = socket.gethostname()
    assert [(h.state, h.action, h.actor, h.host) for h in history] == [
        (JobState.QUEUED, "", people["alice_name"], host),
        (JobState.QUEUED, "cancel", people["ops_name"], host),
        (JobState.CANCELLED, "", people["ops_name"], host),
    ]
    shown = runner.invoke(app, ["status", job_id, "--json"], env=bob)
    assert [(h["state"], h["actor"]) for h in json.loads(shown.stdout)["history"]] == [
        ("queued", people["alice_name"]), ("queued", people["ops_name"]),
        ("cancelled", people["ops_name"]),
    ]  # fmt: skip


def test_a_user_cancels_her_own_queued_job_at_once(
    people: dict[str, str],  # noqa: F811
    env: dict[str, str | None], key_prefix: str, ledger: Ledger, tmp_path: Path,
) -> None:  # fmt: skip
    """The owner's own cancel of a job no runner holds ends it at once under her ACL rule too:
    the gate carries it out."""
    script = tmp_path / "train.sh"
    script.write_text("echo hi\n")
    (tmp_path / "store").mkdir()
    alice = as_user(env, people["alice"], key_prefix)
    submitted = runner.invoke(
        app,
        ["submit", str(script), "--name", "mnist-mlp-acl-own", "--local-store",
         str(tmp_path / "store"), "--commit", "abc1234", "--json",
         "--waive", "config-diff", "--waive", "paths", "--waive", "monitoring"],
        env=alice,
    )  # fmt: skip
    assert submitted.exit_code == 0, submitted.output
    job_id = json.loads(submitted.stdout)["jobs"][0]["job_id"]
    done = runner.invoke(app, ["cancel", job_id, "--json"], env=alice)
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["jobs"][0]["result"] == "cancelled", done.output
    assert ledger.get(job_id).state is JobState.CANCELLED
    assert not ledger.r.exists(ledger.keys.lock(job_id))
    # Counted for `colabq metrics` too, by the gate that carried out her cancel.
    ended = read_ended(ledger.r.hgetall(ledger.keys.metrics_ended()))
    assert [(k[0], k[3], n) for k, n in ended.jobs.items()] == [
        ("cancelled", ledger.get(job_id).get("user"), 1)
    ]


def test_mine_means_the_redis_user_not_the_machines_user(
    people: dict[str, str],  # noqa: F811
    env: dict[str, str | None], key_prefix: str, ledger: Ledger, tmp_path: Path,
) -> None:  # fmt: skip
    """alice and bob submit from one machine as one OS user: `status --mine` and `cancel
    --mine` each see only the jobs of the Redis user they are."""
    script = tmp_path / "train.sh"
    script.write_text("echo hi\n")
    (tmp_path / "store").mkdir()
    jobs = {}
    for who in ("alice", "bob"):
        res = runner.invoke(
            app,
            ["submit", str(script), "--name", f"mine-{who}", "--local-store",
             str(tmp_path / "store"), "--commit", "abc1234", "--json",
             "--waive", "config-diff", "--waive", "paths", "--waive", "monitoring"],
            env={**as_user(env, people[who], key_prefix), "USER": "shared", "LOGNAME": "shared"},
        )  # fmt: skip
        assert res.exit_code == 0, res.output
        jobs[who] = json.loads(res.stdout)["jobs"][0]["job_id"]
    for who in ("alice", "bob"):
        me = as_user(env, people[who], key_prefix)
        listed = runner.invoke(app, ["status", "--mine", "--json"], env=me)
        assert listed.exit_code == 0, listed.output
        assert [r["job_id"] for r in json.loads(listed.stdout)] == [jobs[who]], listed.stdout
    done = runner.invoke(
        app, ["cancel", "--mine", "--json"], env=as_user(env, people["alice"], key_prefix)
    )
    assert [j["job_id"] for j in json.loads(done.stdout)["jobs"]] == [jobs["alice"]]
    assert ledger.get(jobs["bob"]).state is JobState.QUEUED
