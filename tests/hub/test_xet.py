"""Xet: this server has none, and the client must be told so.

huggingface_hub 2.x picks Xet for uploads on the client side alone (`hf_xet` installed and
`HF_HUB_DISABLE_XET` unset), whatever the server answers to preupload; so `HF_HUB_DISABLE_XET=1`
is required for LFS-sized files. Downloads follow the server: without `X-Xet-Hash` headers the
client downloads over plain HTTP even with Xet enabled.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from huggingface_hub import RepoFile, constants

from .conftest import Hub


def test_with_xet_disabled_uploads_and_downloads_never_touch_xet(hub: Hub, tmp_path: Path) -> None:
    api = hub.api()
    api.create_repo("alice/run-1")
    api.upload_file(path_or_fileobj=b"\0" * 2048, path_in_repo="w.bin", repo_id="alice/run-1")
    api.hf_hub_download("alice/run-1", "w.bin", cache_dir=tmp_path)

    entry = next(iter(api.get_paths_info("alice/run-1", ["w.bin"])))
    assert isinstance(entry, RepoFile) and entry.lfs is not None and entry.xet_hash is None
    assert hub.requests("/_lfs/upload/")
    assert not hub.requests("xet")


def test_with_xet_enabled_an_lfs_upload_fails_fast_on_the_token_refusal(
    hub: Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", False)
    api = hub.api()
    api.create_repo("alice/run-1")

    with pytest.raises(ConnectionError, match="xet-write-token"):
        api.upload_file(
            path_or_fileobj=os.urandom(64) + b"\0", path_in_repo="w.bin", repo_id="alice/run-1"
        )

    assert [r["status"] for r in hub.requests("/xet-write-token/")] == [501]
    assert api.list_repo_files("alice/run-1") == [".gitattributes"]


def test_with_xet_enabled_downloads_still_use_plain_http(
    hub: Hub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    api = hub.api()
    api.create_repo("alice/run-1")
    api.upload_file(path_or_fileobj=b"\0" * 2048, path_in_repo="w.bin", repo_id="alice/run-1")
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", False)

    local = api.hf_hub_download("alice/run-1", "w.bin", cache_dir=tmp_path)

    assert Path(local).read_bytes() == b"\0" * 2048
    assert not hub.requests("xet")
