"""Uploading, listing, downloading and deleting files through the real client, and the commit
guarantees (history, atomicity) colabq relies on."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, RepoFile, RepoFolder
from huggingface_hub.errors import BadRequestError, HfHubHTTPError, RemoteEntryNotFoundError
from huggingface_hub.utils import get_session

from .conftest import Hub

BIG_BYTES = 10 * 1024 * 1024 + 4096  # just over the Hub's 10 MiB LFS threshold


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "outputs"
    (root / "logs" / "deep").mkdir(parents=True)
    (root / "metrics.json").write_text(json.dumps({"loss": 0.1}))
    (root / "logs" / "train.log").write_text("step 1\nstep 2\n")
    (root / "logs" / "deep" / "note.txt").write_text("nested")
    (root / "model.bin").write_bytes(os.urandom(BIG_BYTES))
    return root


def test_upload_folder_sends_big_file_through_lfs_and_small_ones_inline(
    hub: Hub, folder: Path
) -> None:
    api = hub.api()
    api.create_repo("alice/run-1", private=True)
    hub.admin.clear_requests()

    commit = api.upload_folder(folder_path=folder, repo_id="alice/run-1", commit_message="ckpt")

    paths = [(r["method"], r["path"].split("?")[0]) for r in hub.admin.requests()]
    stored = hub.data_dir / "objects"
    big_sha = hashlib.sha256((folder / "model.bin").read_bytes()).hexdigest()
    assert ("POST", "/alice/run-1.git/info/lfs/objects/batch") in paths
    assert sum(method == "PUT" and p.startswith("/_lfs/upload/") for method, p in paths) == 1
    assert ("POST", "/alice/run-1.git/info/lfs/objects/verify") in paths
    assert [p for _, p in paths if "/commit/" in p] == ["/api/models/alice/run-1/commit/main"]
    assert not [p for _, p in paths if "xet" in p]
    assert (stored / big_sha[:2] / big_sha).stat().st_size == BIG_BYTES
    assert commit.oid == hub.api().repo_info("alice/run-1").sha


def test_tree_lists_names_sizes_and_lfs_info(hub: Hub, folder: Path) -> None:
    api = hub.api()
    api.create_repo("alice/run-1")
    api.upload_folder(folder_path=folder, repo_id="alice/run-1")

    entries = {e.path: e for e in api.list_repo_tree("alice/run-1", recursive=True)}
    top = {e.path for e in api.list_repo_tree("alice/run-1")}
    sub = {e.path for e in api.list_repo_tree("alice/run-1", path_in_repo="logs")}

    files = {p: e.size for p, e in entries.items() if isinstance(e, RepoFile)}
    assert files == {
        ".gitattributes": files[".gitattributes"],
        "metrics.json": len(json.dumps({"loss": 0.1})),
        "logs/train.log": 14,
        "logs/deep/note.txt": 6,
        "model.bin": BIG_BYTES,
    }
    assert isinstance(entries["logs/deep"], RepoFolder)
    big = entries["model.bin"]
    assert isinstance(big, RepoFile) and big.lfs is not None and big.lfs.size == BIG_BYTES
    assert isinstance(entries["metrics.json"], RepoFile) and entries["metrics.json"].lfs is None
    assert top == {".gitattributes", "metrics.json", "logs", "model.bin"}
    assert sub == {"logs/train.log", "logs/deep"}
    assert sorted(api.list_repo_files("alice/run-1")) == sorted(files)


def test_tree_listing_follows_pagination(make_hub: Callable[..., Hub], folder: Path) -> None:
    hub = make_hub(tree_page_size=2)
    api = hub.api()
    api.create_repo("alice/run-1")
    api.upload_folder(folder_path=folder, repo_id="alice/run-1")
    hub.admin.clear_requests()

    files = api.list_repo_files("alice/run-1")

    assert len(files) == 5
    assert len(hub.requests("/tree/main")) == 4  # 5 files + 2 folders, 2 per page


@pytest.mark.parametrize("filename", ["model.bin", "logs/deep/note.txt"])
def test_download_is_byte_identical(hub: Hub, folder: Path, tmp_path: Path, filename: str) -> None:
    api = hub.api()
    api.create_repo("alice/run-1", private=True)
    api.upload_folder(folder_path=folder, repo_id="alice/run-1")

    local = api.hf_hub_download("alice/run-1", filename, cache_dir=tmp_path / "cache")

    assert Path(local).read_bytes() == (folder / filename).read_bytes()


def test_snapshot_download_fetches_every_file(hub: Hub, folder: Path, tmp_path: Path) -> None:
    api = hub.api()
    api.create_repo("alice/run-1", repo_type="dataset")
    api.upload_folder(folder_path=folder, repo_id="alice/run-1", repo_type="dataset")

    local = Path(
        api.snapshot_download("alice/run-1", repo_type="dataset", local_dir=tmp_path / "snap")
    )

    assert (local / "logs/deep/note.txt").read_text() == "nested"
    assert (local / "model.bin").read_bytes() == (folder / "model.bin").read_bytes()


def test_file_metadata_and_byte_ranges(hub: Hub) -> None:
    api = hub.api()
    api.create_repo("alice/run-1")
    commit = api.upload_file(
        path_or_fileobj=b"0123456789", path_in_repo="a.txt", repo_id="alice/run-1"
    )
    url = f"{hub.url}/alice/run-1/resolve/main/a.txt"
    auth = {"authorization": f"Bearer {hub.tokens['alice_write']}"}

    head = get_session().head(url, headers=auth)
    ranged = get_session().get(url, headers={**auth, "Range": "bytes=2-5"})
    tail = get_session().get(url, headers={**auth, "Range": "bytes=7-"})
    beyond = get_session().get(url, headers={**auth, "Range": "bytes=50-"})

    assert head.headers["X-Repo-Commit"] == commit.oid
    assert head.headers["Content-Length"] == "10" and head.headers["ETag"]
    assert not [h for h in head.headers if h.lower().startswith("x-xet")]
    assert (ranged.status_code, ranged.content) == (206, b"2345")
    assert ranged.headers["Content-Range"] == "bytes 2-5/10"
    assert (tail.status_code, tail.content) == (206, b"789")
    assert beyond.status_code == 416


def test_paths_info_and_file_exists(hub: Hub, folder: Path) -> None:
    api = hub.api()
    api.create_repo("alice/run-1")
    api.upload_folder(folder_path=folder, repo_id="alice/run-1")

    info = api.get_paths_info("alice/run-1", ["metrics.json", "logs", "missing.txt", "model.bin"])

    by_path = {e.path: e for e in info}
    assert set(by_path) == {"metrics.json", "logs", "model.bin"}
    assert isinstance(by_path["logs"], RepoFolder)
    model = by_path["model.bin"]
    assert isinstance(model, RepoFile) and model.size == BIG_BYTES and model.lfs is not None
    assert api.file_exists("alice/run-1", "logs/train.log") is True
    assert api.file_exists("alice/run-1", "logs/missing.log") is False
    assert api.file_exists("alice/nope", "logs/train.log") is False


def test_upload_file_then_delete_file_and_folder(hub: Hub, folder: Path) -> None:
    api = hub.api()
    api.create_repo("alice/run-1")
    api.upload_folder(folder_path=folder, repo_id="alice/run-1")

    api.upload_file(
        path_or_fileobj=b"exit_code=0\n", path_in_repo="status/exit_code", repo_id="alice/run-1"
    )
    after_upload = set(api.list_repo_files("alice/run-1"))
    api.delete_file("metrics.json", repo_id="alice/run-1")
    api.delete_folder("logs", repo_id="alice/run-1")
    after_delete = set(api.list_repo_files("alice/run-1"))

    assert "status/exit_code" in after_upload and "metrics.json" in after_upload
    assert after_delete == {".gitattributes", "model.bin", "status/exit_code"}
    with pytest.raises(RemoteEntryNotFoundError):
        api.delete_file("metrics.json", repo_id="alice/run-1")


def test_old_commits_stay_readable(hub: Hub, tmp_path: Path) -> None:
    api = hub.api()
    api.create_repo("alice/run-1")
    first = api.upload_file(path_or_fileobj=b"v1", path_in_repo="a.txt", repo_id="alice/run-1")
    api.upload_file(path_or_fileobj=b"v2", path_in_repo="a.txt", repo_id="alice/run-1")

    old = api.hf_hub_download("alice/run-1", "a.txt", revision=first.oid, cache_dir=tmp_path)
    new = api.hf_hub_download("alice/run-1", "a.txt", cache_dir=tmp_path)

    assert (Path(old).read_bytes(), Path(new).read_bytes()) == (b"v1", b"v2")


def test_commit_is_all_or_nothing(hub: Hub) -> None:
    """An LFS file whose bytes never reached the server sinks the whole commit."""
    api = hub.api()
    api.create_repo("alice/run-1")
    before = api.repo_info("alice/run-1").sha
    ok = CommitOperationAdd(path_in_repo="ok.txt", path_or_fileobj=b"fine")
    ghost = CommitOperationAdd(path_in_repo="ghost.bin", path_or_fileobj=b"\0" * 100)
    ghost._upload_mode = "lfs"
    ghost._is_uploaded = True  # pretend it was uploaded: the server must notice it wasn't

    with pytest.raises(BadRequestError):
        api.create_commit("alice/run-1", [ok, ghost], commit_message="half")

    assert api.repo_info("alice/run-1").sha == before
    assert api.list_repo_files("alice/run-1") == [".gitattributes"]


def test_unchanged_files_are_not_committed_again(hub: Hub, folder: Path) -> None:
    api = hub.api()
    api.create_repo("alice/run-1")
    first = api.upload_folder(folder_path=folder, repo_id="alice/run-1")
    hub.admin.clear_requests()

    second = api.upload_folder(folder_path=folder, repo_id="alice/run-1")

    assert second.oid == first.oid
    assert hub.requests("/commit/") == [] and hub.requests("/_lfs/upload/") == []


def test_stale_parent_commit_is_refused(hub: Hub) -> None:
    api = hub.api()
    api.create_repo("alice/run-1")
    base = api.repo_info("alice/run-1").sha
    api.upload_file(path_or_fileobj=b"a", path_in_repo="a.txt", repo_id="alice/run-1")
    op = CommitOperationAdd(path_in_repo="b.txt", path_or_fileobj=b"b")

    with pytest.raises(HfHubHTTPError) as excinfo:
        api.create_commit("alice/run-1", [op], commit_message="late", parent_commit=base)

    assert excinfo.value.response.status_code == 412
    assert "b.txt" not in api.list_repo_files("alice/run-1")
