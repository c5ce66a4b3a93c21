"""`colabq submit --code git|snapshot`: the commit shipped is checked before anything is
enqueued (on the remote, not from a dirty tree, its uv.lock current), a snapshot is staged once
into the store, and the plan says what the VM will fetch and run. Real git repositories with a
local bare remote, a uv project locked offline, the real Redis."""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from producer.cli import app
from tests.cli.code_repo import PIN, UV_ENV, code_repo, commit_all, git, tree_files
from tests.cli.training_repo import GOOD_NAME
from tests.gatethread import written
from worker.records.ledger import Ledger

runner = CliRunner()
QUEUE = "gpu.t4"


@pytest.fixture
def qenv(env: dict[str, str | None]) -> dict[str, str | None]:
    return {**env, **UV_ENV}


@pytest.fixture
def queue(redis_client: redis.Redis, ledger: Ledger) -> Iterator[redis.Redis]:
    """The queue's messages of this test's jobs are removed afterwards (the ledger's keys are
    the `ledger` fixture's); other tests share the queue."""
    yield redis_client
    job_ids = [i.decode() for i in redis_client.zrange(ledger.keys.jobs(), 0, -1)]
    for message in redis_client.lrange(QUEUE, 0, -1):
        if any(job_id.encode() in message for job_id in job_ids):
            redis_client.lrem(QUEUE, 0, message)


def submit(repo: Path, env: dict[str, str | None], *args: str):  # type: ignore[no-untyped-def]
    argv = ["submit", str(repo / "train.sh"), "--repo-dir", str(repo), "--name", GOOD_NAME,
            "--config", "configs/detr/intended.yaml", "--seconds-per-epoch", "600",
            "--local-store", str(repo.parent / "store")]  # fmt: skip
    return runner.invoke(app, [*argv, *args], env=env)


def assert_refused(result, redis_client: redis.Redis, key_prefix: str, queued: int) -> str:  # type: ignore[no-untyped-def]
    """Exit 2, one line on stderr and no traceback, nothing in Redis: returns the line."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert not written(redis_client, key_prefix)
    assert redis_client.llen(QUEUE) == queued
    return str(lines[0])


def test_a_commit_not_on_the_remote_is_refused_until_pushed(
    tmp_path: Path, qenv: dict[str, str | None], ledger: Ledger, queue: redis.Redis, key_prefix: str
) -> None:
    repo, remote = code_repo(tmp_path)
    (repo / "train.py").write_text((repo / "train.py").read_text() + "# faster\n")
    commit = commit_all(repo, "not pushed yet")
    queued = queue.llen(QUEUE)
    line = assert_refused(submit(repo, qenv, "--code", "git"), queue, key_prefix, queued)
    assert line.startswith("colabq: Pre-flight failed (code): ")
    assert f"commit {commit[:12]} is not known to be on origin ({remote})" in line
    assert "git push" in line and "--waive code" in line

    git(repo, "push", "-q")
    result = submit(repo, qenv, "--code", "git", "--json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["jobs"]
    spec = ledger.get(row["job_id"]).spec
    assert spec.code is not None and spec.code.commit == commit == spec.commit
    assert (spec.code.mode, spec.code.remote, spec.code.uv, spec.code.python) == (
        "git", str(remote), True, PIN
    )  # fmt: skip
    assert row["code"]["commit"] == commit and row["code"]["remote"] == str(remote)
    assert row["code"]["run"] == "uv run --no-sync bash train.sh"
    assert row["code"]["starts_in"] == "/content/colab-jobs/<job>/repo"


def test_a_stale_uv_lock_is_refused_in_one_line(
    tmp_path: Path, qenv: dict[str, str | None], ledger: Ledger, queue: redis.Redis, key_prefix: str
) -> None:
    repo, _ = code_repo(tmp_path)
    pyproject = repo / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('version = "0.1.0"', 'version = "0.2.0"'))
    commit_all(repo, "a new version, the lock left behind")
    git(repo, "push", "-q")
    queued = queue.llen(QUEUE)
    line = assert_refused(submit(repo, qenv, "--code", "git"), queue, key_prefix, queued)
    assert line.startswith("colabq: Pre-flight failed (environment): uv.lock is out of date")
    assert "run `uv lock` and commit uv.lock" in line


def test_a_dirty_tree_is_refused_unless_waived_by_its_own_name(
    tmp_path: Path, qenv: dict[str, str | None], ledger: Ledger, queue: redis.Redis, key_prefix: str
) -> None:
    repo, _ = code_repo(tmp_path)
    head = git(repo, "rev-parse", "HEAD")
    (repo / "scratch.txt").write_text("untracked: not a dirty tree\n")
    assert submit(repo, qenv, "--code", "snapshot", "--dry-run").exit_code == 0
    (repo / "train.py").write_text("print('edited, not committed')\n")
    queued = queue.llen(QUEUE)
    for waive in ([], ["--waive", "code"]):  # the check's own name does not waive a dirty tree
        result = submit(repo, qenv, "--code", "snapshot", *waive)
        line = assert_refused(result, queue, key_prefix, queued)
        assert line.startswith("colabq: Pre-flight failed (dirty-tree): 1 tracked file(s) changed")
        assert "(train.py)" in line and "--waive dirty-tree" in line

    result = submit(repo, qenv, "--code", "snapshot", "--waive", "dirty-tree", "--json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["jobs"]
    spec = ledger.get(row["job_id"]).spec
    assert spec.waivers == ("dirty-tree",)
    assert spec.code is not None and spec.code.commit == head  # the commit, not the edit
    with tarfile.open(spec.code.snapshot.removeprefix("file://")) as tar:
        shipped = tar.extractfile("train.py")
        assert shipped is not None and b"edited" not in shipped.read()


def test_a_sweep_stages_one_snapshot_holding_the_commit_and_its_includes(
    tmp_path: Path, qenv: dict[str, str | None], ledger: Ledger, queue: redis.Redis
) -> None:
    repo, _ = code_repo(tmp_path)
    head = git(repo, "rev-parse", "HEAD")
    (repo / "weights").mkdir()
    (repo / "weights" / "init.bin").write_bytes(b"\x00\x01" * 100)  # ignored by git
    (repo / "notes.txt").write_text("untracked, not included\n")
    args = ["--code", "snapshot", "--include", "weights", "--sweep", "env.LR=1e-4,3e-4"]
    result = submit(repo, qenv, *args, "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["jobs"]
    specs = [ledger.get(r["job_id"]).spec for r in rows]
    uris = {s.code.snapshot for s in specs if s.code is not None}
    assert len(specs) == 2 and len(uris) == 1  # every point ships the one archive
    archives = list((tmp_path / "store").rglob("*.tar.gz"))
    assert len(archives) == 1 and uris == {f"file://{archives[0]}"}
    assert archives[0].name.startswith(f"{head}-") and archives[0].parent.name == "code"
    assert [r["code"]["staged"] for r in rows] == ["uploaded", "uploaded"]
    with tarfile.open(archives[0]) as tar:
        files = {m.name for m in tar.getmembers() if m.isfile()}
        marker = tar.extractfile(".colabq-commit")
        assert marker is not None and marker.read().decode() == f"{head}\n"
    assert files == tree_files(repo, head) | {"weights/init.bin", ".colabq-commit"}

    again = submit(repo, qenv, *args, "--idempotency-key", "again", "--allow-same-run", "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["jobs"][0]["code"]["staged"] == "already there"


def test_preflight_reports_the_code_and_environment_checks(
    tmp_path: Path, qenv: dict[str, str | None]
) -> None:
    repo, remote = code_repo(tmp_path)
    base = ["preflight", "--repo-dir", str(repo), "--name", GOOD_NAME, "--config",
            "configs/detr/intended.yaml", "--seconds-per-epoch", "600"]  # fmt: skip
    result = runner.invoke(app, [*base, "--code", "git", "--json"], env=qenv)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    found = {f["check"]: f for f in data["findings"]}
    assert found["code"]["verdict"] == "pass" and "is on origin" in found["code"]["saw"]
    assert f"remote origin: {remote}" in found["code"]["details"]
    assert found["environment"]["verdict"] == "pass"
    assert f"uv sync --frozen (Python {PIN})" in found["environment"]["saw"]
    assert "--code git" in data["submit_command"]

    # Without --code the VM gets the script alone: the named config would not be there.
    alone = runner.invoke(app, [*base, "--json"], env=qenv)
    assert alone.exit_code == 2, alone.output
    code = {f["check"]: f for f in json.loads(alone.stdout)["findings"]}["code"]
    assert code["verdict"] == "fail"
    assert code["saw"].startswith("the VM would not have configs/detr/intended.yaml")
    assert "--code snapshot or --code git" in code["next_action"]
    assert "drop --config" in code["next_action"]
    unnamed = [a for a in base if a not in ("--config", "configs/detr/intended.yaml")]
    table = runner.invoke(app, unnamed, env=qenv)  # no config named, no code: both pass
    assert table.exit_code == 0, table.output
    assert "│ code " in table.output and "no code shipped" in table.output
    assert "│ environment " in table.output


def test_a_dry_run_shows_what_the_vm_fetches_and_runs(
    tmp_path: Path, qenv: dict[str, str | None], queue: redis.Redis, key_prefix: str
) -> None:
    repo, remote = code_repo(tmp_path)
    head = git(repo, "rev-parse", "HEAD")
    run = f"run: in /content/colab-jobs/<job>/repo: uv sync --frozen (Python {PIN}), then uv run"
    fetched = submit(repo, qenv, "--code", "git", "--dry-run")
    assert fetched.exit_code == 0, fetched.output
    assert f"code: the VM fetches {remote} @ {head} into /content/colab-jobs/<job>/repo" in (
        fetched.output
    )
    assert f"{run} --no-sync bash train.sh" in fetched.output

    snapshot = submit(repo, qenv, "--code", "snapshot", "--dry-run")
    assert snapshot.exit_code == 0, snapshot.output
    files = len(tree_files(repo, head)) + 1
    uri = f"file://{tmp_path / 'store' / GOOD_NAME / 'code' / head}.tar.gz"
    assert f"code: the VM downloads {uri} ({files} files, " in snapshot.output
    assert "staged when submitted" in snapshot.output
    assert not (tmp_path / "store").exists()  # a dry run stages nothing
    assert not written(queue, key_prefix)


def test_a_named_config_without_code_is_refused_in_one_line_saying_how_to_ship_it(
    tmp_path: Path, qenv: dict[str, str | None], ledger: Ledger, queue: redis.Redis, key_prefix: str
) -> None:
    """The README's old main example: --config without code: the pre-flight checks a config the
    VM would never get (it gets the job script alone)."""
    repo, _ = code_repo(tmp_path)
    queued = queue.llen(QUEUE)
    line = assert_refused(submit(repo, qenv), queue, key_prefix, queued)  # --config, no --code
    assert line.startswith(
        "colabq: Pre-flight failed (code): the VM would not have configs/detr/intended.yaml "
        "(without code: it gets the job script alone): ship the repository with --code snapshot "
        "or --code git (code: in a job file), or drop --config"
    ), line
    result = submit(repo, qenv, "--code", "snapshot", "--json")  # shipped: the config is there
    assert result.exit_code == 0, result.output
    spec = ledger.get(json.loads(result.stdout)["jobs"][0]["job_id"]).spec
    assert spec.config == "configs/detr/intended.yaml"
    assert spec.code is not None and spec.code.mode == "snapshot"
