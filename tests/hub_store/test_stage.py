"""Staging local data on the Hub before submission: `stage()` and the `colabq stage` command
function (through Typer's CliRunner on a one-command app, as the lead registers it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from producer.commands.stage import stage as stage_command
from producer.stage import stage
from worker.errors import HubDestinationExists, HubRepoNotPrivate, UserInputError
from worker.store.hub import HubStore

from .conftest import Hub


def _data(root: Path) -> Path:
    (root / "shards").mkdir(parents=True)
    (root / "shards" / "000.bin").write_bytes(b"\0" + os.urandom(3000))
    (root / "shards" / "001.bin").write_bytes(b"\0" + os.urandom(3000))
    (root / "meta.json").write_text('{"rows": 2}')
    return root


def test_stage_uploads_a_folder_to_a_new_private_repo(
    hub: Hub, store: HubStore, tmp_path: Path
) -> None:
    data = _data(tmp_path / "coco")

    result = stage(data, "hf://datasets/alice/coco/v1", store)

    assert result.uri == "hf://datasets/alice/coco/v1"
    assert (result.size_bytes, result.files, result.replaced_bytes) == (6013, 3, 0)
    assert result.repo.created and hub.api().repo_info("alice/coco", repo_type="dataset").private
    files = set(hub.api().list_repo_files("alice/coco", repo_type="dataset"))
    assert {"v1/shards/000.bin", "v1/shards/001.bin", "v1/meta.json"} <= files
    assert hub.api().repo_info("alice/coco", repo_type="dataset").sha == result.commit


def test_stage_refuses_to_overwrite_unless_asked(hub: Hub, store: HubStore, tmp_path: Path) -> None:
    data = _data(tmp_path / "ckpt")
    first = stage(data, "hf://alice/ckpts/run1", store)
    (data / "shards" / "001.bin").unlink()
    (data / "meta.json").write_text('{"rows": 1}')

    with pytest.raises(HubDestinationExists) as refused:
        stage(data, "hf://alice/ckpts/run1", store)
    sha_after_refusal = hub.api().repo_info("alice/ckpts").sha
    replaced = stage(data, "hf://alice/ckpts/run1", store, overwrite=True)

    assert refused.value.size_bytes == first.size_bytes
    assert sha_after_refusal == first.commit  # nothing was written
    assert replaced.replaced_bytes == first.size_bytes and replaced.size_bytes == 3012
    files = {f for f in hub.api().list_repo_files("alice/ckpts") if f.startswith("run1/")}
    assert files == {"run1/shards/000.bin", "run1/meta.json"}  # mirrored: the stale shard is gone


def test_stage_a_file_to_a_repo_root_uses_its_name(
    hub: Hub, store: HubStore, tmp_path: Path
) -> None:
    (tmp_path / "train.csv").write_text("a,b\n1,2\n")

    result = stage(tmp_path / "train.csv", "hf://datasets/alice/tab", store)

    assert result.uri == "hf://datasets/alice/tab/train.csv" and result.size_bytes == 8


@pytest.mark.parametrize(
    ("setup", "uri", "error"),
    [
        ("empty", "hf://alice/x/data", UserInputError),
        ("missing", "hf://alice/x/data", UserInputError),
        ("ok", "hf://alice/x@v1/data", UserInputError),
        ("ok", "/local/path", UserInputError),
        ("public", "hf://alice/pub/data", HubRepoNotPrivate),
    ],
)
def test_stage_refuses_bad_inputs_without_writing(
    hub: Hub, store: HubStore, tmp_path: Path, setup: str, uri: str, error: type
) -> None:
    path = tmp_path / "data"
    if setup == "empty":
        (path / "sub").mkdir(parents=True)
        (path / "sub" / "zero.bin").write_bytes(b"")
    elif setup in ("ok", "public"):
        _data(path)
    if setup == "public":
        hub.api().create_repo("alice/pub", private=False)

    with pytest.raises(error):
        stage(path, uri, store)

    assert not hub.api().repo_exists("alice/x")
    assert not hub.requests("/commit/")


def test_stage_command(hub: Hub, tmp_path: Path) -> None:
    app = typer.Typer()
    app.command("stage")(stage_command)
    app.command("noop")(lambda: None)  # a second command: `stage` stays a subcommand
    data = _data(tmp_path / "data")
    env = {"HF_TOKEN": hub.tokens["alice_write"], "HF_ENDPOINT": hub.url}
    runner = CliRunner()

    first = runner.invoke(app, ["stage", str(data), "--to", "hf://alice/d/v1"], env=env)
    again = runner.invoke(app, ["stage", str(data), "--to", "hf://alice/d/v1"], env=env)

    assert first.exit_code == 0, first.output
    assert "staged hf://alice/d/v1: 6013 bytes in 3 file(s)" in first.output
    assert "--hub-input NAME=hf://alice/d/v1" in first.output
    assert isinstance(again.exception, HubDestinationExists)
    assert hub.tokens["alice_write"] not in first.output
