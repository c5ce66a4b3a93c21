"""`colabq submit` runs the pre-flight first: a failing check enqueues nothing (checked in the
real Redis); a waived one enqueues the job with the waiver and the report digest recorded."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from producer.cli import app
from tests.cli.training_repo import GOOD_NAME, QUIET_ENV, RISKY, make_repo
from tests.gatethread import written
from worker.clock import SystemClock
from worker.records.keys import Keys
from worker.records.ledger import Ledger

runner = CliRunner()
QUEUE = "gpu.t4"
FENCE = re.compile(r"```bash\n(?P<command>.+)\n```")


@pytest.fixture
def env(redis_url: str, key_prefix: str, tmp_path: Path) -> dict[str, str | None]:
    return {
        **QUIET_ENV,
        "COLABQ_REDIS_URL": redis_url,
        "COLABQ_KEY_PREFIX": key_prefix,
        "HOME": str(tmp_path),
        "COLUMNS": "200",
    }


@pytest.fixture
def ledger(redis_client: redis.Redis, key_prefix: str) -> Iterator[Ledger]:
    keys = Keys(key_prefix)
    yield Ledger(redis_client, SystemClock(), keys, log_maxlen=1000)
    # Leave the shared test database as it was: this test's queue messages and keys.
    job_ids = [i.decode() for i in redis_client.zrange(keys.jobs(), 0, -1)]
    for message in redis_client.lrange(QUEUE, 0, -1):
        if any(job_id.encode() in message for job_id in job_ids):
            redis_client.lrem(QUEUE, 0, message)
    for key in redis_client.scan_iter(f"{key_prefix}:*"):
        redis_client.delete(key)


def _messages_for(client: redis.Redis, job_id: str) -> int:
    return sum(1 for m in client.lrange(QUEUE, 0, -1) if job_id.encode() in m)


def submit(repo: Path, env: dict[str, str | None], *args: str):  # type: ignore[no-untyped-def]
    argv = ["submit", str(repo / "train.sh"), "--repo-dir", str(repo)]
    argv += ["--local-store", str(repo / "store"), "--commit", "abc1234"]
    argv += ["--seconds-per-epoch", "600", "--idempotency-key", env["COLABQ_KEY_PREFIX"] or ""]
    return runner.invoke(app, [*argv, *args], env=env)


def test_a_failing_check_enqueues_nothing(
    tmp_path: Path,
    env: dict[str, str | None],
    ledger: Ledger,
    redis_client: redis.Redis,
    key_prefix: str,
) -> None:
    repo = make_repo(tmp_path / "repo", RISKY)
    before = redis_client.llen(QUEUE)
    result = submit(repo, env, "--name", GOOD_NAME)  # the newest config, RISKY
    assert result.exit_code == 2, result.output
    assert "Submission blocked by: config-diff" in result.output  # the report is printed
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("colabq: Pre-flight failed (config-diff)")
    assert "--waive config-diff" in last
    assert not written(redis_client, key_prefix)
    assert redis_client.llen(QUEUE) == before

    as_json = submit(repo, env, "--name", GOOD_NAME, "--json")
    assert as_json.exit_code == 2
    report = json.loads(as_json.stdout)  # the report as data; the one line goes to stderr
    assert report["ok"] is False and report["submit_command"] is None
    assert "Pre-flight failed (config-diff)" in as_json.stderr
    assert not written(redis_client, key_prefix)
    assert redis_client.llen(QUEUE) == before


def test_a_waived_check_enqueues_the_job_with_waiver_and_digest(
    tmp_path: Path,
    env: dict[str, str | None],
    ledger: Ledger,
    redis_client: redis.Redis,
) -> None:
    repo = make_repo(tmp_path / "repo", RISKY)
    args = ["--name", GOOD_NAME]
    result = submit(repo, env, *args, "--waive", "config-diff", "--json")
    assert result.exit_code == 0, result.output
    (out,) = json.loads(result.stdout)["jobs"]
    job_id = out["job_id"]
    assert out["created"] is True and out["waivers"] == ["config-diff"]

    record = ledger.get(job_id)
    assert record.spec.waivers == ("config-diff",)
    assert re.fullmatch(r"[0-9a-f]{64}", record.spec.preflight_digest or "")
    assert record.spec.preflight_digest == out["preflight_digest"]
    assert _messages_for(redis_client, job_id) == 1

    status = runner.invoke(app, ["status", job_id, "--json"], env=env)
    shown = json.loads(status.stdout)
    assert shown["waivers"] == ["config-diff"]
    assert shown["preflight_digest"] == record.spec.preflight_digest
    detail = runner.invoke(app, ["status", job_id], env=env)
    assert "waived checks" in detail.output and "config-diff" in detail.output

    # The digest follows the clock (the ETA), so it must not make a re-submit a second job.
    again = submit(repo, env, *args, "--waive", "config-diff", "--json")
    (same,) = json.loads(again.stdout)["jobs"]
    assert same["job_id"] == job_id and same["created"] is False
    assert _messages_for(redis_client, job_id) == 1


def test_an_unknown_waiver_is_one_line_and_enqueues_nothing(
    tmp_path: Path,
    env: dict[str, str | None],
    ledger: Ledger,
    redis_client: redis.Redis,
    key_prefix: str,
) -> None:
    repo = make_repo(tmp_path / "repo")
    result = submit(repo, env, "--name", GOOD_NAME, "--waive", "config_diff")
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--waive 'config_diff': no pre-flight check" in lines[0]
    assert not written(redis_client, key_prefix)


def test_the_command_printed_by_preflight_enqueues_the_job(
    tmp_path: Path,
    env: dict[str, str | None],
    ledger: Ledger,
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = make_repo(tmp_path / "repo")
    monkeypatch.chdir(repo)
    checked = runner.invoke(
        app,
        ["preflight", "--name", GOOD_NAME, "--local-store", "store", "--seconds-per-epoch", "600"],
        env=env,
    )
    assert checked.exit_code == 0, checked.output
    match = FENCE.search(checked.output)
    assert match is not None, checked.output
    argv = shlex.split(match["command"])
    assert argv[:2] == ["colabq", "submit"]
    result = runner.invoke(app, [*argv[1:], "--commit", "abc1234", "--json"], env=env)
    assert result.exit_code == 0, result.output
    record = ledger.get(json.loads(result.stdout)["jobs"][0]["job_id"])
    assert record.spec.run_name == GOOD_NAME and record.spec.waivers == ()
    assert record.spec.preflight_digest


def test_a_clean_submit_shows_the_report_table(
    tmp_path: Path, env: dict[str, str | None], ledger: Ledger
) -> None:
    repo = make_repo(tmp_path / "repo")
    result = submit(repo, env, "--name", GOOD_NAME)
    assert result.exit_code == 0, result.output
    assert "colabq pre-flight" in result.output and "report digest" in result.output
    assert "Enqueued job" in result.output
