"""`HubStore` against the local Hub server with the real huggingface_hub client: the output-repo
check, uploads with colabq's commit-level retry, reading inputs back (`exists_nonempty`,
`download`), and the translation of client errors into colabq's tree (cause kept)."""

from __future__ import annotations

import os
from pathlib import Path

import httpx2
import pytest
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

from worker.errors import (
    HubAuthError,
    HubEmptyArtifact,
    HubNotFound,
    HubRepoNotPrivate,
    HubRequestError,
    HubUnavailable,
)
from worker.store.hub import HubStore

from .conftest import FAST, Hub, hf_dest


def _folder(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def _commit_statuses(hub: Hub) -> list[int | None]:
    return [r["status"] for r in hub.requests("/commit/")]


# --- check_output_repo --------------------------------------------------------------------


def test_missing_repo_with_a_write_token_is_created_private(hub: Hub, store: HubStore) -> None:
    check = store.check_output_repo(hf_dest("alice/new-runs"))

    assert (check.created, check.private, check.writable) == (True, True, True)
    assert hub.api().repo_info("alice/new-runs").private is True
    assert hub.api().list_repo_files("alice/new-runs") == [".gitattributes"]  # probe wrote nothing


def test_existing_private_repo_with_a_write_token_passes(hub: Hub, store: HubStore) -> None:
    hub.api().create_repo("alice/runs", repo_type="dataset", private=True)
    before = hub.api().repo_info("alice/runs", repo_type="dataset").sha

    check = store.check_output_repo(hf_dest("alice/runs", repo_type="dataset"))

    assert (check.created, check.private, check.writable) == (False, True, True)
    assert hub.api().repo_info("alice/runs", repo_type="dataset").sha == before


def test_existing_public_repo_fails_and_stays_public(hub: Hub, store: HubStore) -> None:
    hub.api().create_repo("alice/public-runs", private=False)

    with pytest.raises(HubRepoNotPrivate) as excinfo:
        store.check_output_repo(hf_dest("alice/public-runs"))

    assert excinfo.value.repo_id == "alice/public-runs"
    assert hub.api().repo_info("alice/public-runs").private is False  # never flipped
    assert not hub.requests("/settings")


@pytest.mark.parametrize("exists", [True, False], ids=["existing repo", "missing repo"])
def test_a_read_token_fails(hub: Hub, exists: bool) -> None:
    if exists:
        hub.api().create_repo("alice/runs", private=True)
    reader = HubStore(hub.url, hub.tokens["alice_read"], retry=FAST, sleep=lambda s: None)

    with pytest.raises(HubAuthError) as excinfo:
        reader.check_output_repo(hf_dest("alice/runs"))

    assert excinfo.value.status == 403 and "read" in excinfo.value.reason
    assert isinstance(excinfo.value.__cause__, HfHubHTTPError)
    assert hub.api().repo_exists("alice/runs") is exists


def test_another_users_namespace_fails(hub: Hub) -> None:
    bob = HubStore(hub.url, hub.tokens["bob_write"], retry=FAST, sleep=lambda s: None)

    with pytest.raises(HubAuthError) as excinfo:
        bob.check_output_repo(hf_dest("alice/runs"))

    assert excinfo.value.status == 403
    assert not hub.api().repo_exists("alice/runs")


# --- upload_folder and its retry ----------------------------------------------------------


@pytest.fixture
def outputs(hub: Hub, store: HubStore, tmp_path: Path) -> Path:
    store.check_output_repo(hf_dest())
    hub.admin.clear_requests()
    return _folder(tmp_path / "ckpt", {"w.bin": b"\0" + os.urandom(4096), "cfg.json": b"{}"})


def test_upload_folder_lands_under_the_path_in_one_commit(
    hub: Hub, store: HubStore, outputs: Path
) -> None:
    oid = store.upload_folder(outputs, hf_dest(), "exp1/ckpt")

    assert hub.api().repo_info("alice/runs").sha == oid
    assert {"exp1/ckpt/w.bin", "exp1/ckpt/cfg.json"} <= set(hub.api().list_repo_files("alice/runs"))
    assert _commit_statuses(hub) == [200]


@pytest.mark.parametrize("fault", ["status", "close"])
def test_a_transient_commit_failure_is_retried(
    hub: Hub, store: HubStore, outputs: Path, sleeps: list[float], fault: str
) -> None:
    if fault == "status":
        hub.admin.fail_next("POST", r"/commit/", status=503)
    else:
        hub.admin.close_next("POST", r"/commit/")

    oid = store.upload_folder(outputs, hf_dest(), "exp1/ckpt")

    assert _commit_statuses(hub) == [503 if fault == "status" else None, 200]
    assert sleeps == [FAST.base_s]
    assert hub.api().repo_info("alice/runs").sha == oid


def test_a_hub_that_stays_down_gives_hub_unavailable_after_the_attempts(
    hub: Hub, store: HubStore, outputs: Path, sleeps: list[float]
) -> None:
    hub.admin.down("POST", r"/commit/")
    before = hub.api().repo_info("alice/runs").sha

    with pytest.raises(HubUnavailable) as excinfo:
        store.upload_folder(outputs, hf_dest(), "exp1/ckpt")

    err = excinfo.value
    assert (err.attempts, err.status, err.operation) == (FAST.attempts, 503, "upload")
    assert isinstance(err.__cause__, HfHubHTTPError)
    assert _commit_statuses(hub) == [503] * FAST.attempts
    assert sleeps == [0.01, 0.02]
    assert hub.api().repo_info("alice/runs").sha == before


def test_a_dropped_connection_every_time_is_unavailable_too(
    hub: Hub, store: HubStore, outputs: Path
) -> None:
    hub.admin.close_next("POST", r"/commit/", count=FAST.attempts)

    with pytest.raises(HubUnavailable) as excinfo:
        store.upload_folder(outputs, hf_dest(), "exp1/ckpt")

    assert excinfo.value.status is None
    assert isinstance(excinfo.value.__cause__, httpx2.TransportError)


@pytest.mark.parametrize(("status", "error"), [(400, HubRequestError), (403, HubAuthError)])
def test_a_permanent_commit_failure_is_not_retried(
    hub: Hub, store: HubStore, outputs: Path, sleeps: list[float], status: int, error: type
) -> None:
    hub.admin.fail_next("POST", r"/commit/", status=status)

    with pytest.raises(error) as excinfo:
        store.upload_folder(outputs, hf_dest(), "exp1/ckpt")

    assert excinfo.value.status == status
    assert _commit_statuses(hub) == [status]
    assert sleeps == []


def test_upload_to_a_missing_repo_is_not_found(store: HubStore, outputs: Path) -> None:
    with pytest.raises(HubNotFound) as excinfo:
        store.upload_folder(outputs, hf_dest("alice/nowhere"), "x")

    assert excinfo.value.what == "repo"
    assert isinstance(excinfo.value.__cause__, RepositoryNotFoundError)


# --- exists_nonempty and download ---------------------------------------------------------


@pytest.fixture
def inputs(hub: Hub, tmp_path: Path) -> dict[str, bytes]:
    files = {
        "data/train.csv": b"a,b\n1,2\n",
        "data/sub/shard.bin": b"\0\1\2" * 100,
        "weights.bin": b"\0" + os.urandom(2000),
        "empty/zero.txt": b"",
        "zero.bin": b"",
    }
    api = hub.api()
    api.create_repo("alice/inputs", private=True)
    api.upload_folder(repo_id="alice/inputs", folder_path=_folder(tmp_path / "in", files))
    api.create_repo("alice/ds", repo_type="dataset", private=True)
    api.upload_file(
        path_or_fileobj=b"x,y\n", path_in_repo="t.csv", repo_id="alice/ds", repo_type="dataset"
    )
    return files


@pytest.mark.parametrize(
    ("uri", "local", "names"),
    [
        ("hf://alice/inputs/weights.bin", "weights.bin", ["weights.bin"]),
        ("hf://alice/inputs/data", "data", ["data/train.csv", "data/sub/shard.bin"]),
        ("hf://alice/inputs/data/sub/", "data/sub", ["data/sub/shard.bin"]),
        ("hf://alice/inputs@main/data/train.csv", "data/train.csv", ["data/train.csv"]),
        ("hf://datasets/alice/ds/t.csv", "t.csv", []),
    ],
)
def test_present_paths_are_measured_and_downloaded(
    store: HubStore,
    inputs: dict[str, bytes],
    tmp_path: Path,
    uri: str,
    local: str,
    names: list[str],
) -> None:
    size = store.exists_nonempty(uri)
    path = store.download(uri, tmp_path / "dl")

    assert path == tmp_path / "dl" / local
    expected = {n: inputs[n] for n in names} or {"t.csv": b"x,y\n"}
    assert size == sum(len(b) for b in expected.values())
    for name, data in expected.items():
        assert (tmp_path / "dl" / name).read_bytes() == data


@pytest.mark.parametrize(
    ("uri", "error", "what"),
    [
        ("hf://alice/inputs/nope", HubNotFound, "path"),
        ("hf://alice/inputs/data/nope.csv", HubNotFound, "path"),
        ("hf://alice/nowhere/x", HubNotFound, "repo"),
        ("hf://bob/private/x", HubNotFound, "repo"),
        ("hf://alice/inputs@0123456789abcdef/weights.bin", HubNotFound, "revision"),
        ("hf://datasets/alice/inputs/weights.bin", HubNotFound, "repo"),  # wrong repo type
        ("hf://alice/inputs/empty", HubEmptyArtifact, None),
        ("hf://alice/inputs/zero.bin", HubEmptyArtifact, None),
    ],
)
def test_missing_or_empty_paths_are_refused(
    hub: Hub,
    store: HubStore,
    inputs: dict[str, bytes],
    tmp_path: Path,
    uri: str,
    error: type,
    what: str | None,
) -> None:
    hub.api("bob_write").create_repo("bob/private", private=True)

    with pytest.raises(error) as measured:
        store.exists_nonempty(uri)
    with pytest.raises(error):
        store.download(uri, tmp_path / "dl")

    assert getattr(measured.value, "what", None) == what
    assert not (tmp_path / "dl").exists()  # nothing half-downloaded
