"""Redis fails over under a running fleet: two workers on the emulator talk to Redis through
three sentinels (`COLABQ_REDIS_URL=sentinel://...;sentinel://.../0`, the master's name in
`COLABQ_REDIS_MASTER_NAME`) while two jobs run and two wait queued. The master goes (a planned
switchover, or kill -9), a replica takes over, and every job still ends SUCCEEDED, each on one
VM (one assignment billed per job), each of its lines in its log once; the ledger's Lua scripts
run on the new master, which never had them (redis-py loads them again on NOSCRIPT).

Replication is asynchronous: a write the old master acknowledged but had not yet sent to its
replica is lost with it. The planned switchover (docs/operations/sentinel.md) loses none: writes
are paused until the replica has them all. kill -9 may lose the master's last instant of writes
(here there is no writer faster than the replica link, and none is lost); what colabq writes
twice (heartbeats, leases) comes back on its own, and a message lost from a queue is sent again
by the janitor (a QUEUED job no queue holds, after COLABQ_ORPHAN_GRACE_S).

The same holds with every part of a deployment across machines (`full_security`): the master
behind a password, colabq an ACL user there, the sentinels behind their own password with an
ACL user of theirs for colabq, and TLS on every connection."""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from producer.doctor import Status, sentinel_row
from tests.integration.conftest import Fleet, start_worker, stop_worker
from tests.integration.sentinel_cluster import (
    MASTER_NAME,
    SentinelCluster,
    full_security,
    wait_until,
)
from tests.integration.test_run_on_vm import assert_each_line_once, numbered, submit
from worker.records.forward import FORWARD_SCRIPT
from worker.settings import load_settings
from worker.states import JobState

pytestmark = pytest.mark.integration
LINES = 30  # 0.1 s apart: each job runs about 3 s
JOBS = 4  # two run at once (two workers), two wait queued


SECURED = "passwords and TLS"


@pytest.fixture
def cluster(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[SentinelCluster]:
    root = tmp_path_factory.mktemp("sentinel")
    security = full_security(root) if getattr(request, "param", None) == SECURED else None
    with SentinelCluster(root, security=security) as c:
        yield c


@pytest.fixture
def redis_url(cluster: SentinelCluster, monkeypatch: pytest.MonkeyPatch) -> str:
    for name, value in cluster.env().items():  # the fixture's own ledger's settings
        monkeypatch.setenv(name, value)
    return cluster.url


@pytest.fixture
def fleet_env_extra(cluster: SentinelCluster, tmp_path: Path) -> dict[str, str]:
    # The worker's gate opens the test's folder to ACL users' local stores (no other folder is
    # open under ACLs: `worker.people.destinations`).
    return {**cluster.env(), "COLABQ_LOCAL_STORE_ROOT": str(tmp_path)}


def states(fleet: Fleet, ids: list[str]) -> dict[str, int]:
    return dict(Counter(fleet.ledger.get(i).state.name for i in ids))


def beats(client: redis.Redis, fleet: Fleet, ids: list[str]) -> list[float]:
    """The jobs' watchdog heartbeats as `client`'s Redis holds them."""
    keys = fleet.ledger.keys
    return [float(b) for i in ids if (b := client.hget(keys.watch(i), "heartbeat_at"))]


@pytest.mark.parametrize(
    ("how", "cluster"),
    [("switchover", "plain"), ("kill -9", "plain"), ("kill -9", SECURED)],
    indirect=["cluster"],
)
def test_a_failover_loses_no_job_and_runs_none_twice(
    fleet: Fleet, cluster: SentinelCluster, how: str
) -> None:
    second = start_worker(fleet.other_host(), fleet.root / "worker2.log")
    try:
        ids = [
            submit(fleet, numbered(LINES, pause_s=0.1), "--name", f"sentinel-{n}")
            for n in range(JOBS)
        ]
        wait_until(
            lambda: sum("line-3" in fleet.output(i) for i in ids) == 2, "two jobs running", 60
        )
        before = states(fleet, ids)
        assert before.get("QUEUED") == JOBS - 2, before
        old = cluster.master_port()
        (replica,) = [p for p in cluster.data_ports if p != old]
        settings = load_settings(redis_url=cluster.url)
        before_row = sentinel_row(settings, 2.0)  # `colabq doctor`'s
        assert before_row.status is Status.PASS, before_row
        said = f"3 of 3 sentinel(s) answer for '{MASTER_NAME}': the master is 127.0.0.1:{old}, "
        assert f"{said}with 1 replica(s) up; OK 3 usable Sentinels" in before_row.detail, before_row
        sha = hashlib.sha1(FORWARD_SCRIPT.encode()).hexdigest()
        assert cluster.data(replica).script_exists(sha) == [False]  # scripts are not replicated
        last_beat = max(beats(cluster.data(old), fleet, ids))
        failed_at = time.monotonic()
        if how == "switchover":
            cluster.switchover()
        else:
            cluster.kill(old)
        new_master = cluster.data(replica)
        wait_until(lambda: max(beats(new_master, fleet, ids)) > last_beat, "a beat", 30)
        resumed_s = time.monotonic() - failed_at
        assert cluster.master_port() == replica
        ended = {i: fleet.wait_terminal(i, timeout_s=90) for i in ids}
        print(
            f"\n{how}: jobs before {before}, after {states(fleet, ids)}; first ledger write "
            f"through the new master {resumed_s:.2f} s after the failover began"
        )
        assert set(ended.values()) == {JobState.SUCCEEDED}, ended
        for job_id in ids:
            assert_each_line_once(fleet, job_id, LINES)
        bills = fleet.billing()
        assert len(bills) == JOBS and all(b["unassigned_at"] for b in bills), bills
        assert new_master.script_exists(sha) == [True]  # loaded again there on NOSCRIPT
        after_row = sentinel_row(settings, 2.0)
        assert f"the master is 127.0.0.1:{replica}, with" in after_row.detail, after_row
        if how == "kill -9":  # nothing left to fail over to: doctor says so
            assert after_row.status is Status.WARN and "start a replica" in after_row.todo
    finally:
        stop_worker(second)
