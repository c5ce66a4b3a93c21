"""`colabq submit job.yaml` and sweeps, through the real command on the real Redis: a job file
gives the same job as the flags, flags override it, a sweep records N jobs at once (all or none),
each pre-flighted, and `--dry-run` enqueues nothing."""

from __future__ import annotations

import json
import secrets
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
from worker.spec import decode_spec

runner = CliRunner()


@pytest.fixture
def prefix(redis_client: redis.Redis) -> Iterator[str]:
    p = f"sweeptest-{secrets.token_hex(4)}"
    yield p
    for key in redis_client.scan_iter(f"{p}*"):
        redis_client.delete(key)


@pytest.fixture
def env(redis_url: str, prefix: str, tmp_path: Path) -> dict[str, str | None]:
    return {
        **QUIET_ENV,
        "COLABQ_REDIS_URL": redis_url,
        "COLABQ_KEY_PREFIX": prefix,
        "COLABQ_QUEUE_PREFIX": f"{prefix}.",
        "HOME": str(tmp_path),
        "COLUMNS": "200",
    }


@pytest.fixture
def ledger(redis_client: redis.Redis, prefix: str) -> Ledger:
    return Ledger(redis_client, SystemClock(), Keys(prefix), log_maxlen=1000)


def write_job(tmp_path: Path, body: str) -> Path:
    make_repo(tmp_path / "repo")
    path = tmp_path / "job.yaml"
    path.write_text(
        "script: repo/train.sh\n"
        f"name: {GOOD_NAME}\n"
        "repo_dir: repo\n"
        "local_store: store\n"
        "commit: abc1234\n"
        "seconds_per_epoch: 600\n" + body
    )
    return path


def jobs(ledger: Ledger) -> list[dict[str, object]]:
    out = []
    for job_id in ledger.r.zrange(ledger.keys.jobs(), 0, -1):
        spec = decode_spec(ledger.r.hget(ledger.keys.job(job_id.decode()), "spec"))
        out.append(spec.model_dump())
    return out


def queued(client: redis.Redis, prefix: str, gpu: str = "t4") -> int:
    return int(client.llen(f"{prefix}.gpu.{gpu}"))


def test_a_job_file_is_the_same_job_as_its_flags(
    tmp_path: Path, env: dict[str, str | None], ledger: Ledger
) -> None:
    path = write_job(tmp_path, "gpu: L4\nwall: 2h\nidle: 90s\nenv: {WARMUP: 500}\n")
    res = runner.invoke(app, ["submit", str(path), "--json"], env=env)
    assert res.exit_code == 0, res.output
    repo = tmp_path / "repo"
    flags = [
        "submit", str(repo / "train.sh"), "--name", GOOD_NAME, "--repo-dir", str(repo),
        "--local-store", str(tmp_path / "store"), "--commit", "abc1234",
        "--seconds-per-epoch", "600", "--gpu", "L4", "--wall", "2h", "--idle", "90s",
        "--env", "WARMUP=500", "--json",
    ]  # fmt: skip
    again = runner.invoke(app, flags, env=env)
    assert again.exit_code == 0, again.output
    ((first,), (second,)) = (
        json.loads(res.output.splitlines()[-1])["jobs"],
        json.loads(again.output.splitlines()[-1])["jobs"],
    )
    # Same options -> same idempotency key -> the second is the first job, nothing sent twice.
    assert first["created"] and not second["created"]
    assert second["job_id"] == first["job_id"]
    (spec,) = jobs(ledger)
    assert spec["gpu"] == "L4" and spec["wall_cap_s"] == 7200 and spec["env"] == {"WARMUP": "500"}


def test_flags_override_the_file(
    tmp_path: Path, env: dict[str, str | None], ledger: Ledger, prefix: str,
    redis_client: redis.Redis,
) -> None:  # fmt: skip
    path = write_job(tmp_path, "gpu: L4\n")
    res = runner.invoke(app, ["submit", str(path), "--gpu", "A100", "--json"], env=env)
    assert res.exit_code == 0, res.output
    assert [j["gpu"] for j in jobs(ledger)] == ["A100"]
    assert queued(redis_client, prefix, "a100") == 1 and queued(redis_client, prefix, "l4") == 0


def test_a_sweep_records_and_sends_every_point_once(
    tmp_path: Path, env: dict[str, str | None], ledger: Ledger, prefix: str,
    redis_client: redis.Redis,
) -> None:  # fmt: skip
    path = write_job(tmp_path, "sweep:\n  env.SEED: [0, 1, 2]\n")
    res = runner.invoke(
        app, ["submit", str(path), "--sweep", "env.LR=1e-4,3e-4", "--json"], env=env
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.output.splitlines()[-1])
    assert data["count"] == 6 and all(j["created"] for j in data["jobs"])
    specs = jobs(ledger)
    assert sorted(s["run_name"] for s in specs) == sorted(
        f"{GOOD_NAME}-seed{s}-lr{lr}" for s in (0, 1, 2) for lr in ("1e-4", "3e-4")
    )
    assert len({s["idempotency_key"] for s in specs}) == 6
    assert all(s["preflight_digest"] for s in specs)
    assert queued(redis_client, prefix) == 6
    # The same sweep again: every job known by its key, nothing sent.
    again = runner.invoke(
        app, ["submit", str(path), "--sweep", "env.LR=1e-4,3e-4", "--json"], env=env
    )
    assert again.exit_code == 0, again.output
    assert not any(j["created"] for j in json.loads(again.output.splitlines()[-1])["jobs"])
    assert queued(redis_client, prefix) == 6


def test_dry_run_prints_the_plan_and_changes_nothing(
    tmp_path: Path, env: dict[str, str | None], prefix: str, redis_client: redis.Redis
) -> None:
    path = write_job(tmp_path, "sweep:\n  env.SEED: [0, 1]\n  gpu: [T4, L4]\n")
    res = runner.invoke(app, ["submit", str(path), "--dry-run"], env=env)
    assert res.exit_code == 0, res.output
    assert "plan: 4 job(s)" in res.output and "nothing was enqueued" in res.output
    assert f"{GOOD_NAME}-seed1-l4" in res.output
    assert not written(redis_client, prefix)


def test_one_point_refused_enqueues_none(
    tmp_path: Path, env: dict[str, str | None], prefix: str, redis_client: redis.Redis
) -> None:
    path = write_job(tmp_path, "")
    one = runner.invoke(app, ["submit", str(path), "--sweep", "env.SEED=1", "--json"], env=env)
    assert one.exit_code == 0, one.output
    # A new sweep whose second point is the live run above (another key, same destination).
    res = runner.invoke(
        app, ["submit", str(path), "--sweep", "env.SEED=0,1", "--idempotency-key", "x"], env=env
    )
    assert res.exit_code == 2, res.output
    assert "already has a live job" in res.output
    assert int(redis_client.zcard(f"{prefix}:jobs")) == 1
    assert queued(redis_client, prefix) == 1


def test_a_failing_preflight_enqueues_no_point(
    tmp_path: Path, env: dict[str, str | None], prefix: str, redis_client: redis.Redis
) -> None:
    path = write_job(tmp_path, "sweep:\n  env.SEED: [0, 1]\n")
    (tmp_path / "repo" / "configs" / "detr" / "intended.yaml").write_text(RISKY)
    res = runner.invoke(app, ["submit", str(path)], env=env)
    assert res.exit_code == 2
    assert "Pre-flight failed (config-diff)" in res.output
    assert not written(redis_client, prefix)


def test_a_derived_name_that_fails_the_run_name_check_stops_the_sweep(
    tmp_path: Path, env: dict[str, str | None], prefix: str, redis_client: redis.Redis
) -> None:
    path = write_job(tmp_path, "")
    res = runner.invoke(
        app, ["submit", str(path), "--name", "coco-detr-r50-{env.PHASE}",
              "--sweep", "env.PHASE=bs64,wave-2"], env=env,
    )  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "run-name" in res.output
    assert not written(redis_client, prefix)


def test_the_same_job_file_again_after_its_job_failed_is_a_new_linked_job(
    tmp_path: Path, env: dict[str, str | None], ledger: Ledger
) -> None:
    from worker.states import JobState

    path = write_job(tmp_path, "")
    first = runner.invoke(app, ["submit", str(path)], env=env)
    assert first.exit_code == 0, first.output
    (old,) = [j.decode() for j in ledger.r.zrange(ledger.keys.jobs(), 0, -1)]
    assert ledger.claim(old, "owner", ttl_s=60)
    ledger.transition(old, JobState.FAILED, owner="owner", reason="test: the job exited 1")
    again = runner.invoke(app, ["submit", str(path)], env=env)
    assert again.exit_code == 0, again.output
    assert f"Submitted again: job {old}" in again.stdout
    ids = [j.decode() for j in ledger.r.zrange(ledger.keys.jobs(), 0, -1)]
    (new,) = set(ids) - {old}
    prefix = str(env["COLABQ_KEY_PREFIX"])
    assert ledger.get(new).get("retry_of") == old and queued(ledger.r, prefix) == 2
    # While the new one is live, the same file again is that job: nothing sent.
    third = runner.invoke(app, ["submit", str(path)], env=env)
    assert f"Already submitted as job {new} (QUEUED, not over)" in third.stdout, third.output
    assert queued(ledger.r, prefix) == 2


def test_one_json_shape_for_one_job_or_a_sweep_and_the_table_names_each_id(
    tmp_path: Path, env: dict[str, str | None], ledger: Ledger
) -> None:
    path = write_job(tmp_path, "")
    one = runner.invoke(app, ["submit", str(path), "--json"], env=env)
    two = runner.invoke(app, ["submit", str(path), "--sweep", "env.SEED=7,8", "--json"], env=env)
    shapes = [json.loads(r.stdout) for r in (one, two)]
    assert [sorted(d) for d in shapes] == [["count", "jobs", "sweep", "warnings"]] * 2, shapes
    assert shapes[0]["sweep"] is None and shapes[1]["sweep"].startswith("sw")
    assert [d["count"] for d in shapes] == [1, 2] and shapes[0]["jobs"][0]["created"]
    assert all({"job_id", "run", "state", "swept"} <= set(j) for d in shapes for j in d["jobs"])
    table = runner.invoke(app, ["submit", str(path), "--sweep", "env.SEED=7,8,9"], env=env)
    assert table.exit_code == 0, table.output
    ids = [j.decode() for j in ledger.r.zrange(ledger.keys.jobs(), 0, -1)]
    assert len(ids) == 4  # 1 + 2, and one new point (9): 7 and 8 were submitted before
    for job_id in ids[1:]:
        assert job_id in table.stdout, table.stdout
    assert table.stdout.count("submitted before (QUEUED)") == 2
