"""`colabq clean --delete-remote` on a Hub destination: shown in a dry run, deleted only with
--yes, in one commit, and only the run's own prefix."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from producer.cli import app
from tests.cli.training_repo import QUIET_ENV
from tests.factories import make_spec
from tests.hub import conftest as hub_conftest
from tests.hub.conftest import Hub
from worker.clock import SystemClock
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.spec import ArtifactDest
from worker.states import JobState

_client_env = hub_conftest._client_env
make_hub = hub_conftest.make_hub
hub = hub_conftest.hub

RUN = "coco-detr-r50-bs64-lr1e-4"
REPO = "alice/runs"


@pytest.fixture
def ledger(redis_client: redis.Redis, key_prefix: str) -> Iterator[Ledger]:
    yield Ledger(redis_client, SystemClock(), Keys(key_prefix), log_maxlen=1000)
    for key in redis_client.scan_iter(f"{key_prefix}:*"):
        redis_client.delete(key)


def remote_files(hub: Hub) -> set[str]:
    return {f.path for f in hub.api().list_repo_tree(REPO, recursive=True) if hasattr(f, "size")}


@pytest.mark.usefixtures("gate")
def test_hub_prefix_deleted_only_with_both_flags(
    hub: Hub, ledger: Ledger, tmp_path: Path, redis_url: str, key_prefix: str
) -> None:
    api = hub.api()
    api.create_repo(REPO, private=True)
    api.upload_file(path_or_fileobj=b"w", path_in_repo=f"{RUN}/ckpt/last.pt", repo_id=REPO)
    api.upload_file(path_or_fileobj=b"k", path_in_repo="other-run/keep.pt", repo_id=REPO)
    job = make_spec(run_name=RUN, artifact=ArtifactDest(kind="hf", repo=REPO, prefix=RUN))
    ledger.create(job)
    ledger.transition(job.job_id, JobState.CANCELLED, owner="", reason="done")
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {
        **QUIET_ENV, "COLABQ_REDIS_URL": redis_url, "COLABQ_KEY_PREFIX": key_prefix,
        "HOME": str(tmp_path / "home"), "HF_ENDPOINT": hub.url,
        "HF_TOKEN": hub.tokens["alice_write"], "COLUMNS": "200",
    }  # fmt: skip
    runner = CliRunner()
    no_flag = runner.invoke(app, ["clean", RUN, "--repo-dir", str(repo), "--yes"], env=env)
    assert no_flag.exit_code == 0, no_flag.output
    assert "--delete-remote" in no_flag.output
    assert f"{RUN}/ckpt/last.pt" in remote_files(hub)

    dry = runner.invoke(app, ["clean", RUN, "--repo-dir", str(repo), "--delete-remote"], env=env)
    assert dry.exit_code == 0, dry.output
    assert f"hf://{REPO}/{RUN}" in dry.output
    assert f"{RUN}/ckpt/last.pt" in remote_files(hub)

    real = runner.invoke(
        app, ["clean", RUN, "--repo-dir", str(repo), "--delete-remote", "--yes"], env=env
    )
    assert real.exit_code == 0, real.output
    assert remote_files(hub) == {".gitattributes", "other-run/keep.pt"}
    assert hub.tokens["alice_write"] not in real.output
