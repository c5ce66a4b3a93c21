"""Quotas on a fleet (issue 27), under Redis ACLs: the workers run as a service user, alice
submits as herself, and an operator's quota holds her, fleet-wide.

- 4 workers, alice's 2-GPU quota, 6 jobs: never more than 2 of hers running (sampled as they run
  and proved after from the histories), all 6 succeed, and a waiting one's `colabq status` says
  "waiting: quota alice gpus 2 of 2 running".
- A unit quota reached while her job runs: the running job SUCCEEDS, her next job waits and
  `colabq status` says until when (the day's end); the operator's clear makes it run.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
from typer.testing import CliRunner

from producer.cli import app
from tests.integration.aclfleet import TAG, fleet_env_extra, users  # noqa: F401
from tests.integration.conftest import Fleet, start_worker, stop_worker
from tests.integration.test_run_on_vm import RUN, WAIVE, wait_for
from worker.people.acl import Role, rules_for
from worker.quota.periods import periods_at
from worker.states import TERMINAL, JobState

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
runner = CliRunner()


def make_alice(fleet: Fleet, redis_url: str, made: list[str]) -> tuple[str, dict[str, str]]:
    """Alice, a user on the fleet's prefixes: her name and her CLI environment."""
    alice = f"alice-{TAG}"
    rules = rules_for(alice, Role.USER, fleet.ledger.keys.prefix, fleet.env["COLABQ_QUEUE_PREFIX"])
    fleet.ledger.r.execute_command("ACL", "SETUSER", alice, "on", ">pw-alice-" + TAG, *rules)
    made.append(alice)
    where = redis_url.split("://", 1)[1].rsplit("@", 1)[-1]
    return alice, {**fleet.env, "COLABQ_REDIS_URL": f"redis://{alice}:pw-alice-{TAG}@{where}"}


def submit(fleet: Fleet, env: dict[str, str], name: str, script: str, *more: str) -> list[str]:
    path = fleet.root / f"{name}.sh"
    path.write_text(script)
    result = runner.invoke(
        app,
        ["submit", str(path), "--name", name, "--idle", "3s", "--local-store",
         str(fleet.root / "store"), "--json", *WAIVE, *more],
        env=env,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return [j["job_id"] for j in json.loads(result.stdout)["jobs"]]


def quota(fleet: Fleet, *args: str) -> None:
    """With the workers' service user, which has an operator's rights."""
    done = runner.invoke(app, ["quota", *args], env=fleet.env)
    assert done.exit_code == 0, done.output


def status_text(env: dict[str, str], job_id: str) -> str:
    return str(runner.invoke(app, ["status", job_id], env={**env, "COLUMNS": "250"}).stdout)


def test_a_users_gpu_quota_holds_her_jobs_fleet_wide(
    fleet: Fleet,
    redis_url: str,
    users: list[str],  # noqa: F811 (the fixture)
) -> None:
    name, alice = make_alice(fleet, redis_url, users)
    quota(fleet, "set", "--user", name, "--gpus", "2")
    with ThreadPoolExecutor(3) as pool:  # started side by side: each takes seconds
        others = list(
            pool.map(lambda i: start_worker(fleet.env, fleet.root / f"w{i}.log"), (2, 3, 4))
        )
    try:
        ids = submit(fleet, alice, RUN + "-q-{env.I}", "sleep 3; echo point $I\n",
                     "--sweep", "env.I=" + ",".join(str(i) for i in range(6)))  # fmt: skip
        assert len(ids) == 6
        running = fleet.ledger.keys.quota_running("user", name)
        most, said, deadline = 0, "", time.monotonic() + 420
        while time.monotonic() < deadline:
            states = [fleet.ledger.state_of(j) for j in ids]
            busy = sum(s is not JobState.QUEUED and s not in TERMINAL for s in states)
            most = max(most, busy, int(fleet.ledger.r.scard(running)))
            assert busy <= 2 and fleet.ledger.r.scard(running) <= 2, states
            if not said:
                waiting = [j for j in ids if fleet.ledger.get(j).reason.startswith("waiting: q")]
                text = status_text(alice, waiting[0]) if waiting else ""
                if "waiting: quota" in text:
                    said = text
            if all(s in TERMINAL for s in states):
                break
            time.sleep(0.5)  # sampled at least every second
        assert [fleet.ledger.state_of(j) for j in ids] == [JobState.SUCCEEDED] * 6
        assert most == 2  # the quota was reached, not merely never approached
        assert f"waiting: quota {name} gpus 2 of 2 running" in said, said
        # From the records: each job runs from its claim (ALLOCATING) to its end.
        edges = []
        for j in ids:
            hist = fleet.ledger.history(j)
            edges += [(next(h.at for h in hist if h.state is JobState.ALLOCATING), 1),
                      (hist[-1].at, -1)]  # fmt: skip
        level = peak = 0
        for _, step in sorted(edges):
            level += step
            peak = max(peak, level)
        assert peak <= 2
        # A freed slot starts the next job at once, not at its backstop retry (30 s).
        claims = sorted(at for at, step in edges if step == 1)[2:]
        ends = sorted(at for at, step in edges if step == -1)
        gaps = [round(c - max(e for e in ends if e <= c), 2) for c in claims]
        print(f"end of a job to the next claim (s): {gaps}")
        assert len({fleet.ledger.get(j).get("worker") for j in ids}) > 2  # the fleet shared them
        wait_for(lambda: fleet.ledger.r.scard(running) == 0, "every slot given back", 10)
    finally:
        for proc in others:
            stop_worker(proc)


def test_a_unit_quota_reached_mid_run_stops_the_next_start_not_the_running_job(
    fleet: Fleet,
    redis_url: str,
    users: list[str],  # noqa: F811 (the fixture)
) -> None:
    name, alice = make_alice(fleet, redis_url, users)
    quota(fleet, "set", "--user", name, "--units-day", "0.002")  # 4.1 s of a T4
    other = start_worker(fleet.env, fleet.root / "w2.log")  # free to take the next job
    try:
        _reach_mid_run_and_wait(fleet, name, alice)
    finally:
        stop_worker(other)


def _reach_mid_run_and_wait(fleet: Fleet, name: str, alice: dict[str, str]) -> None:
    flag = fleet.share() / "go"
    (first,) = submit(fleet, alice, RUN + "-cu-1",
                      f"while [ ! -e {flag} ]; do sleep 0.2; done; echo done\n")  # fmt: skip
    fleet.wait_state(first, JobState.RUNNING, 180)

    def reached() -> bool:
        shown = runner.invoke(app, ["quota", "--user", name, "--json"], env=alice)
        return json.loads(shown.stdout)["quotas"][0]["new_job"] != "starts"

    wait_for(reached, "the quota reached while the job runs", 120)
    assert fleet.ledger.state_of(first) is JobState.RUNNING
    (second,) = submit(fleet, alice, RUN + "-cu-2", "echo second\n")
    wait_for(lambda: "units-day" in fleet.ledger.get(second).reason, "the next one waits", 60)
    flag.touch()  # the running job goes on to its end
    assert fleet.wait_terminal(first, 180) is JobState.SUCCEEDED
    # The slot the first job freed made the second due, and the claim deferred it again.
    wait_for(lambda: float(fleet.ledger.get(second).get("retry_at") or 0) > time.time() + 1,
             "its next try set past the job's end", 60)  # fmt: skip
    rec = fleet.ledger.get(second)
    assert rec.state is JobState.QUEUED and rec.owner == ""
    retry_at = float(rec.get("retry_at") or 0)
    day = periods_at(retry_at - 1, "UTC")[0]
    assert retry_at == day.end_at  # its next try: the day's end, not a backstop
    text = status_text(alice, second)
    assert f"waiting: quota {name} units-day" in text and f"until {day.end_text}" in text, text
    quota(fleet, "clear", "--user", name)
    assert fleet.wait_terminal(second, 180) is JobState.SUCCEEDED
    # Alice may read the quotas and never write them, whatever client she uses.
    bare = redis.Redis.from_url(alice["COLABQ_REDIS_URL"])
    with pytest.raises(redis.exceptions.NoPermissionError):
        bare.hset(fleet.ledger.keys.quota_limits(), f"user|{name}|units_day", "1000")
