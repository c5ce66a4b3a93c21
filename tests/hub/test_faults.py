"""Injected faults, as the real client experiences them.

Findings pinned here (huggingface_hub 2.x): the commit POST is sent once, never retried (a 5xx
raises `HfHubHTTPError`, a dropped connection raises the transport's `RemoteProtocolError`), while
preupload/LFS calls go through the client's `http_backoff` and survive one transient failure. A
file download's GET is not retried on 5xx but is resumed after a dropped connection.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx2
import pytest
from huggingface_hub.errors import HfHubHTTPError

from .conftest import Hub


def _upload(hub: Hub, content: bytes = b"exit_code=0\n") -> str:
    commit = hub.api().upload_file(
        path_or_fileobj=content, path_in_repo="status.txt", repo_id="alice/run-1"
    )
    return commit.oid


@pytest.fixture
def repo(hub: Hub) -> Hub:
    hub.api().create_repo("alice/run-1")
    hub.admin.clear_requests()
    return hub


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_on_commit_raises_without_client_retry(repo: Hub, status: int) -> None:
    repo.admin.fail_next("POST", r"/commit/", status=status)
    before = repo.api().repo_info("alice/run-1").sha

    with pytest.raises(HfHubHTTPError) as excinfo:
        _upload(repo)

    assert excinfo.value.response.status_code == status
    assert len(repo.requests("/commit/")) == 1  # the client did not retry the commit
    assert repo.api().repo_info("alice/run-1").sha == before
    assert _upload(repo) != before  # the fault was one-shot: the next commit goes through


def test_5xx_on_preupload_is_retried_by_the_client(repo: Hub) -> None:
    repo.admin.fail_next("POST", r"/preupload/", status=503)

    oid = _upload(repo)

    statuses = [r["status"] for r in repo.requests("/preupload/")]
    assert statuses == [503, 200]
    assert oid == repo.api().repo_info("alice/run-1").sha


def test_closed_connection_on_commit_is_a_transport_error(repo: Hub) -> None:
    repo.admin.close_next("POST", r"/commit/")

    with pytest.raises(httpx2.RemoteProtocolError) as excinfo:
        _upload(repo)

    assert isinstance(excinfo.value, httpx2.TransportError)
    assert not isinstance(excinfo.value, HfHubHTTPError)
    assert [(r["status"], r["fault"]) for r in repo.requests("/commit/")] == [(None, "close")]
    assert repo.api().list_repo_files("alice/run-1") == [".gitattributes"]


def test_closed_connection_on_preupload_is_retried_by_the_client(repo: Hub) -> None:
    repo.admin.close_next("POST", r"/preupload/")

    _upload(repo)

    assert [r["fault"] for r in repo.requests("/preupload/")] == ["close", None]


def test_down_answers_503_until_cleared(repo: Hub) -> None:
    rule = repo.admin.down("GET", r"/api/models/")

    with pytest.raises(HfHubHTTPError) as first:
        repo.api().repo_info("alice/run-1")
    with pytest.raises(HfHubHTTPError):
        repo.api().repo_info("alice/run-1")
    repo.admin.remove_fault(rule)

    assert first.value.response.status_code == 503
    assert repo.api().repo_info("alice/run-1").id == "alice/run-1"


def test_delay_slows_only_matching_requests(repo: Hub) -> None:
    repo.admin.delay("GET", r"/api/models/alice/run-1$", delay_s=0.3, count=1)

    started = time.monotonic()
    repo.api().repo_info("alice/run-1")
    slow_s = time.monotonic() - started
    started = time.monotonic()
    repo.api().repo_info("alice/run-1")
    fast_s = time.monotonic() - started

    assert slow_s >= 0.3
    assert fast_s < 0.3
    assert repo.admin.faults() == []


def test_fault_counts_and_non_matching_requests(repo: Hub) -> None:
    repo.admin.fail_next("POST", r"/commit/", status=502, count=2)

    repo.api().repo_info("alice/run-1")  # not a commit: untouched
    rules = repo.admin.faults()

    assert [(r["kind"], r["count"]) for r in rules] == [("status", 2)]
    for _ in range(2):
        with pytest.raises(HfHubHTTPError):
            _upload(repo)
    _upload(repo)
    assert [r["status"] for r in repo.requests("/commit/")] == [502, 502, 200]


def test_5xx_on_file_download_raises_but_a_dropped_download_is_resumed(
    repo: Hub, tmp_path: Path
) -> None:
    _upload(repo, b"payload")
    repo.admin.fail_next("GET", r"/resolve/", status=503)

    with pytest.raises(HfHubHTTPError) as excinfo:
        repo.api().hf_hub_download("alice/run-1", "status.txt", cache_dir=tmp_path / "a")
    repo.admin.close_next("GET", r"/resolve/")
    local = repo.api().hf_hub_download("alice/run-1", "status.txt", cache_dir=tmp_path / "b")

    assert excinfo.value.response.status_code == 503
    assert Path(local).read_bytes() == b"payload"
    gets = [r["status"] for r in repo.requests("/resolve/") if r["method"] == "GET"]
    assert gets == [503, None, 200]
