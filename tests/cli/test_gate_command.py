"""A submit no gate answers, then `colabq gate` (issue 26), on the real Redis: with no gate
running, `colabq submit` says in one line (exit 10) that its request is kept, and `colabq
requests` lists it; `colabq gate` started then carries it out (the job is recorded and queued),
`requests` lists none and names the gate; SIGTERM stops the gate, which gives its lease back."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from producer.cli import app
from tests.cli.training_repo import QUIET_ENV
from worker.records.keys import Keys

runner = CliRunner()
WAIVE = ["--waive", "config-diff", "--waive", "paths", "--waive", "monitoring"]


@pytest.fixture
def no_gate_env(redis_url: str, key_prefix: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A command's environment on this test's prefixes, where no gate runs (not `env`, whose
    tests get one)."""
    env = {**{k: v for k, v in QUIET_ENV.items() if v is not None}, "COLABQ_REDIS_URL": redis_url,
           "COLABQ_KEY_PREFIX": key_prefix, "COLABQ_QUEUE_PREFIX": f"{key_prefix}.",
           "HOME": str(tmp_path / "home"), "COLUMNS": "200"}  # fmt: skip
    yield env
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(f"{key_prefix}*"):
        client.delete(key)


def wait_for(what: str, done: object, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_request_no_gate_answers_is_kept_and_colabq_gate_carries_it_out(
    no_gate_env: dict[str, str], redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    script = tmp_path / "train.sh"
    script.write_text("echo hi\n")
    (tmp_path / "store").mkdir()
    kept = runner.invoke(
        app, ["submit", str(script), "--name", "kept-run", "--local-store", str(tmp_path / "store"),
              "--commit", "abc1234", "--json", *WAIVE], env=no_gate_env,
    )  # fmt: skip
    assert kept.exit_code == 10, kept.output
    [line] = kept.stderr.strip().splitlines()
    assert "is kept" in line and "colabq gate" in line and "colabq requests" in line, line
    listed = json.loads(runner.invoke(app, ["requests", "--json"], env=no_gate_env).stdout)
    assert (listed["count"], listed["gate"]) == (1, None)
    assert listed["requests"][0]["op"] == "submit" and listed["requests"][0]["jobs"] == 1

    client, keys = redis.Redis.from_url(redis_url), Keys(key_prefix)
    gate = subprocess.Popen(
        [sys.executable, "-m", "producer.cli", "gate"], env=no_gate_env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        wait_for("the kept request carried out", lambda: client.zcard(keys.jobs()) == 1)
        [job_id] = [j.decode() for j in client.zrange(keys.jobs(), 0, -1)]
        assert client.hget(keys.job(job_id), "state") == b"queued"
        assert client.llen(f"{key_prefix}.gpu.t4") == 1
        listed = json.loads(runner.invoke(app, ["requests", "--json"], env=no_gate_env).stdout)
        assert listed["count"] == 0 and listed["gate"], listed
    finally:
        gate.send_signal(signal.SIGTERM)
        out, _ = gate.communicate(timeout=30)
    assert gate.returncode == 0, out
    assert b"serving requests" in out
    assert not client.exists(keys.gate_lease())  # given back, not left to expire
