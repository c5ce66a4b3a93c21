"""`colabq submit` to a Hub repo checks, with this machine's token, that the output repo is
private and writable; a public repo or a read-only token fails before anything is queued."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from producer.cli import app
from tests.gatethread import written
from tests.hub import conftest as hub_conftest
from tests.hub.conftest import Hub

_client_env = hub_conftest._client_env
make_hub = hub_conftest.make_hub
hub = hub_conftest.hub

WAIVE = ["--waive", "config-diff", "--waive", "paths", "--waive", "monitoring"]


def submit(hub: Hub, tmp_path: Path, redis_url: str, prefix: str, token: str, repo: str):  # type: ignore[no-untyped-def]
    script = tmp_path / "train.sh"
    script.write_text("echo train\n")
    env = {
        "COLABQ_REDIS_URL": redis_url, "COLABQ_KEY_PREFIX": prefix, "HOME": str(tmp_path),
        "HF_ENDPOINT": hub.url, "HF_TOKEN": token,
    }  # fmt: skip
    return CliRunner().invoke(
        app, ["submit", str(script), "--name", "mnist-mlp-bs64-lr1e-3-repo", "--hub-repo", repo,
              "--repo-dir", str(tmp_path), *WAIVE], env=env,
    )  # fmt: skip


@pytest.mark.parametrize("case", ["public repo", "read-only token"])
def test_unsafe_output_repo_fails_preflight_and_enqueues_nothing(
    case: str, hub: Hub, tmp_path: Path, redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    if case == "public repo":
        hub.api().create_repo("alice/public-runs", private=False)
        token, repo = hub.tokens["alice_write"], "alice/public-runs"
    else:
        token, repo = hub.tokens["alice_read"], "alice/runs"
    before = redis_client.llen("gpu.t4")
    result = submit(hub, tmp_path, redis_url, key_prefix, token, repo)
    assert result.exit_code == 2, result.output
    assert "Pre-flight failed (output-repo)" in result.output
    assert not written(redis_client, key_prefix)
    assert redis_client.llen("gpu.t4") == before
    assert token not in result.output


@pytest.mark.usefixtures("gate")
def test_private_writable_repo_is_created_and_the_job_enqueued(
    hub: Hub, tmp_path: Path, redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    result = submit(
        hub, tmp_path, redis_url, key_prefix, hub.tokens["alice_write"], "alice/new-runs"
    )
    assert result.exit_code == 0, result.output
    assert "created private repo" in result.output
    assert hub.api().repo_info("alice/new-runs").private is True
    assert list(redis_client.scan_iter(f"{key_prefix}:job:*"))
    redis_client.delete("gpu.t4")
