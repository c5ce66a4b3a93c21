"""`colabq submit --code git` from a repository whose remote is an ssh remote
(`git@github.com:...`): the submitting machine cannot see the workers' credentials, so it reads
the live workers' cards (which hosts their https credentials cover, whether they hold a deploy
key). No live worker serving the job's queue can fetch it: refused in one line naming both ways
and `code: snapshot`, nothing recorded. One can: accepted, the remote recorded as the user's.
None serves the queue: accepted (it waits; the worker checks again). The user's own ssh is a
fake `ssh` that serves the bare remote to anyone, as a laptop's key would; the real Redis."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from producer.cli import app
from tests.cli.code_repo import UV_ENV, code_repo, git
from tests.cli.test_submit_code import queue as queue
from tests.cli.training_repo import GOOD_NAME
from tests.gitremote import fake_ssh
from worker.records.fleet import WorkerCard, publish, withdraw
from worker.records.keys import Keys
from worker.records.ledger import Ledger

runner = CliRunner()
Env = dict[str, str | None]
REMOTE = "git@github.com:remote.git"
WAIVE = ["--waive", "config-diff", "--waive", "paths", "--waive", "monitoring"]


@pytest.fixture
def repo(tmp_path: Path, env: dict[str, str | None]) -> Iterator[tuple[Path, Env]]:
    repo, _ = code_repo(tmp_path)  # its bare remote is tmp_path/remote.git
    git(repo, "remote", "set-url", "origin", REMOTE)
    ssh = fake_ssh(tmp_path / "ssh", tmp_path, "github.com", None, anyone=True)
    yield repo, {**env, **UV_ENV, "PATH": f"{ssh.bin_dir}:{os.environ['PATH']}"}


@pytest.fixture
def cards(redis_client: redis.Redis, key_prefix: str) -> Iterator[list[WorkerCard]]:
    """Workers' cards this test publishes (live for a minute), withdrawn afterwards."""
    published: list[WorkerCard] = []
    yield published
    for card in published:
        withdraw(redis_client, Keys(key_prefix), card.name, card.queues)


def card(
    redis_client: redis.Redis, key_prefix: str, name: str, queue: str, hosts: tuple[str, ...],
    key: bool = False,
) -> WorkerCard:  # fmt: skip
    now = time.time()
    c = WorkerCard(name, "h", ("T4",), (queue,), None, now, now, git_hosts=hosts, git_ssh_key=key)
    publish(redis_client, Keys(key_prefix), c, ttl_s=60)
    return c


def submit(repo: Path, env: dict[str, str | None], *extra: str):  # type: ignore[no-untyped-def]
    argv = ["submit", str(repo / "train.sh"), "--repo-dir", str(repo), "--name", GOOD_NAME,
            "--code", "git", "--local-store", str(repo.parent / "store"), "--json", *WAIVE,
            *extra]  # fmt: skip
    return runner.invoke(app, argv, env=env)


def test_an_ssh_remote_no_live_worker_can_fetch_is_refused_and_one_that_can_is_accepted(
    repo: tuple[Path, Env],
    redis_client: redis.Redis,
    key_prefix: str,
    ledger: Ledger,
    cards: list[WorkerCard],
    queue: redis.Redis,
) -> None:
    path, env = repo
    queue = "gpu.t4"
    cards.append(card(redis_client, key_prefix, "w-gitlab", queue, ("gitlab.com",)))
    cards.append(card(redis_client, key_prefix, "w-other-gpu", "gpu.a100", ("github.com",)))
    result = submit(path, env)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    line = lines[0]
    assert line.startswith(f"colabq: code: git fetches {REMOTE} over ssh and no live worker "
                           f"serving {queue} (w-gitlab) can on a VM: ")  # fmt: skip
    for way in ("read credential for github.com in COLABQ_GIT_CREDENTIALS_FILE",
                "deploy key in COLABQ_GIT_SSH_KEY_FILE", "code: snapshot"):  # fmt: skip
        assert way in line, line
    assert ledger.list_jobs(10) == []  # nothing recorded, nothing sent

    # A worker of the queue holding a deploy key (or a github.com credential) can.
    cards.append(card(redis_client, key_prefix, "w-key", queue, (), key=True))
    result = submit(path, env)
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["jobs"]
    spec = ledger.get(row["job_id"]).spec
    assert spec.code is not None and spec.code.remote == REMOTE  # the user's, as it is


def test_with_no_live_worker_for_the_queue_an_ssh_remote_waits_for_one(
    repo: tuple[Path, Env], ledger: Ledger, queue: redis.Redis
) -> None:
    path, env = repo
    result = submit(path, env)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["jobs"][0]["created"] is True
    assert any("no live worker serves" in w for w in out["warnings"]), out
