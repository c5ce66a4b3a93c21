"""Tokens: which error class the client raises for 401/403/404, read-only tokens, and the request
log's proof that a token only ever travels in the `authorization` header."""

from __future__ import annotations

import contextlib
import os
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from hubserver.auth import fingerprint
from huggingface_hub import CommitOperationAdd, CommitOperationDelete
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

from .conftest import Hub


@pytest.fixture
def repo(hub: Hub) -> Hub:
    hub.api().create_repo("alice/run-1", private=True)
    return hub


@pytest.mark.parametrize(
    "operation",
    [
        CommitOperationAdd(path_in_repo="a.txt", path_or_fileobj=b"a"),  # refused at preupload
        CommitOperationDelete(path_in_repo=".gitattributes"),  # refused at the commit itself
    ],
    ids=["add", "delete"],
)
def test_read_token_cannot_commit(
    repo: Hub, operation: CommitOperationAdd | CommitOperationDelete
) -> None:
    with pytest.raises(HfHubHTTPError) as excinfo:
        repo.api("alice_read").create_commit("alice/run-1", [operation], commit_message="x")

    assert type(excinfo.value) is HfHubHTTPError  # not a RepositoryNotFoundError: repo is visible
    assert excinfo.value.response.status_code == 403
    assert "read" in (excinfo.value.server_message or "")
    assert repo.api().list_repo_files("alice/run-1") == [".gitattributes"]


def test_admin_can_make_a_token_read_only(repo: Hub) -> None:
    token = repo.tokens["alice_write"]
    repo.api().upload_file(path_or_fileobj=b"1", path_in_repo="a.txt", repo_id="alice/run-1")

    repo.admin.set_token(token, user="alice", role="read")

    with pytest.raises(HfHubHTTPError) as excinfo:
        repo.api().upload_file(path_or_fileobj=b"2", path_in_repo="a.txt", repo_id="alice/run-1")
    assert excinfo.value.response.status_code == 403
    assert repo.api().whoami()["auth"]["accessToken"]["role"] == "read"


def test_unknown_token_is_401_everywhere(repo: Hub) -> None:
    repo.tokens["stranger"] = "hf_not_a_known_token"
    stranger = repo.api("stranger")

    with pytest.raises(HfHubHTTPError) as info_error:
        stranger.repo_info("alice/run-1")
    with pytest.raises(HfHubHTTPError) as whoami_error:
        stranger.whoami()

    assert info_error.value.response.status_code == 401
    assert not isinstance(info_error.value, RepositoryNotFoundError)
    assert whoami_error.value.response.status_code == 401


def test_anonymous_write_is_401_and_foreign_private_repo_is_404(repo: Hub) -> None:
    with pytest.raises(HfHubHTTPError) as anonymous:
        repo.api(None).create_repo("alice/other")
    with pytest.raises(RepositoryNotFoundError) as foreign:
        repo.api("bob_write").upload_file(
            path_or_fileobj=b"x", path_in_repo="x.txt", repo_id="alice/run-1"
        )

    assert anonymous.value.response.status_code == 401
    assert foreign.value.response.status_code == 404


def test_token_only_ever_travels_in_the_authorization_header(hub: Hub, tmp_path: Path) -> None:
    token = hub.tokens["alice_write"]
    api = hub.api()
    folder = tmp_path / "out"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "log.txt").write_text("hello")
    (folder / "weights.bin").write_bytes(os.urandom(10 * 1024 * 1024 + 1))

    api.create_repo("alice/run-2", private=True)
    api.upload_folder(folder_path=folder, repo_id="alice/run-2")
    api.hf_hub_download("alice/run-2", "weights.bin", cache_dir=tmp_path / "cache")
    api.list_repo_files("alice/run-2")
    api.get_paths_info("alice/run-2", ["sub"])
    api.delete_file("sub/log.txt", repo_id="alice/run-2")

    records = hub.admin.requests()
    authed = [r for r in records if "authorization" in r["headers"]]
    uploads = [r for r in records if r["path"].startswith("/_lfs/upload/")]
    assert len(records) >= 10
    assert all(r["token_leaks"] == [] for r in records)
    assert {r["headers"]["authorization"] for r in authed} == {f"Bearer <{fingerprint(token)}>"}
    assert uploads and all("authorization" not in r["headers"] for r in uploads)
    assert token not in (hub.data_dir / "requests.jsonl").read_text()
    assert token not in str(records)


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("nowhere", []),
        ("query", ["query"]),
        ("header", ["header:x-debug"]),
        ("body", ["body"]),
    ],
)
def test_request_log_reports_a_token_outside_authorization(
    repo: Hub, where: str, expected: list[str]
) -> None:
    token = repo.tokens["alice_write"]
    url = f"{repo.url}/api/models/alice/run-1/paths-info/main"
    repo.admin.clear_requests()

    # A fresh connection per request: a pooled keep-alive connection from an earlier test's
    # server (the OS may hand the same port to this one) would log requests that are not ours.
    body = urllib.parse.urlencode(
        {"paths": [token if where == "body" else "README.md"]}, doseq=True
    )
    nonce = secrets.token_hex(8)  # tells this request's log entry from any other's
    req = urllib.request.Request(
        url + f"?nonce={nonce}" + (f"&token={token}" if where == "query" else ""),
        data=body.encode(),
        headers={"authorization": f"Bearer {token}"}
        | ({"x-debug": f"tok={token}"} if where == "header" else {}),
        method="POST",
    )
    with contextlib.suppress(urllib.error.HTTPError):
        urllib.request.urlopen(req, timeout=10).read()

    # Only this request, once it is logged: the server logs a request after answering it (so
    # an earlier request may land after `clear_requests`, and this one a moment after the answer).
    deadline = time.monotonic() + 10
    while not (mine := [r for r in repo.admin.requests() if nonce in r["path"]]):
        assert time.monotonic() < deadline, "the request was never logged"
        time.sleep(0.05)
    assert [r["token_leaks"] for r in mine] == [expected]
