"""Fixtures for the local Hub server's tests: a server on a free port (in a thread) with three
tokens, its admin client (faults, request log, token grants), and the client environment.

`hub` yields a `Hub` handle: `url`, `admin` (`hubserver.AdminClient`), `tokens` (name -> token),
`data_dir`, and `api(name)` -> `huggingface_hub.HfApi(endpoint=url, token=...)`. Use
`make_hub(**config)` for a server with non-default settings (e.g. a small tree page size).

The client is kept off Xet for every test (`HF_HUB_DISABLE_XET=1`, and the already-imported
constant patched): this server has no Xet storage, see test_xet.py for what happens otherwise.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import HfApi, constants

OPS = Path(__file__).resolve().parents[2] / "ops"
if str(OPS) not in sys.path:
    sys.path.insert(0, str(OPS))

from hubserver import AdminClient, RunningServer, ServerConfig, start_server  # noqa: E402

TOKENS = {
    "alice_write": "hf_alice_write_0123456789abcdef",
    "alice_read": "hf_alice_read_0123456789abcdef",
    "bob_write": "hf_bob_write_0123456789abcdef",
}
GRANTS = {
    TOKENS["alice_write"]: {"user": "alice", "role": "write", "orgs": ["colabq-org"]},
    TOKENS["alice_read"]: {"user": "alice", "role": "read"},
    TOKENS["bob_write"]: {"user": "bob", "role": "write"},
}


def worker_hub_env(url: str, token_file: Path) -> dict[str, str]:
    """A worker's (and its VM's) settings for this Hub, with few, quick upload retries."""
    return {
        "COLABQ_HF_ENDPOINT": url,
        "COLABQ_HF_TOKEN_FILE": str(token_file),
        "COLABQ_VM_UPLOAD_ATTEMPTS": "2",
        "COLABQ_VM_UPLOAD_BACKOFF_S": "0.2",
        "HF_ENDPOINT": url,
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    }


@dataclass
class Hub:
    url: str
    admin: AdminClient
    data_dir: Path
    tokens: dict[str, str]
    server: RunningServer = field(repr=False)

    def api(self, name: str | None = "alice_write") -> HfApi:
        """Client as token `name`; `None` for an anonymous client."""
        return HfApi(endpoint=self.url, token=self.tokens[name] if name else False)

    def requests(self, path_part: str = "") -> list[dict[str, Any]]:
        return [r for r in self.admin.requests() if path_part in r["path"]]

    def private_dataset(self) -> str:
        """alice's private dataset `alice/ds` holding `train.csv`; its hf:// URI."""
        api = self.api("alice_write")
        api.create_repo("alice/ds", repo_type="dataset", private=True)
        api.upload_file(
            path_or_fileobj=b"a,b\n1,2\n", path_in_repo="train.csv", repo_id="alice/ds",
            repo_type="dataset",
        )  # fmt: skip
        return "hf://datasets/alice/ds/train.csv"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # huggingface_hub's own LFS PUT passes a file as `data=`; httpx2 warns about it, not about us.
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.filterwarnings("ignore:Use 'content=:DeprecationWarning"))


@pytest.fixture(autouse=True)
def _client_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf_cache"))


@pytest.fixture
def make_hub(tmp_path: Path) -> Iterator[Callable[..., Hub]]:
    started: list[RunningServer] = []

    def _make(**config: Any) -> Hub:
        data_dir = tmp_path / f"hub-data-{len(started)}"
        tokens_path = tmp_path / "tokens.json"
        tokens_path.write_text(json.dumps(GRANTS))
        server = start_server(ServerConfig(data_dir=data_dir, tokens_path=tokens_path, **config))
        started.append(server)
        return Hub(server.url, AdminClient(server.url), data_dir, dict(TOKENS), server)

    yield _make
    for server in started:
        server.stop()


@pytest.fixture
def hub(make_hub: Callable[..., Hub]) -> Hub:
    return make_hub()


@pytest.fixture
def api(hub: Hub) -> HfApi:
    return hub.api()
