"""A user's own Hub token serves the places its whoami says it writes, asked of the local Hub
server through the real `huggingface_hub` client: alice's write token writes `alice` and her org
`colabq-org` (the server answers `roleInOrg` as the Hub does), not bob's namespace; her read
token writes nothing. The gate's `check_destination` refuses the rest in one line, and asks the
Hub once per token while its answer is fresh."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.factories import make_spec
from worker.errors import UserInputError
from worker.people.destinations import check_destination
from worker.people.tokenscope import TokenScope, token_scope
from worker.settings import Settings

from .conftest import Hub, hf_dest


def user_token(folder: Path, user: str, token: str) -> Path:
    path = folder / "user" / user
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path


def test_her_token_writes_her_namespace_and_her_org(hub: Hub, tmp_path: Path) -> None:
    settings = Settings(hf_endpoint=hub.url, state_dir=tmp_path / "state")
    write = user_token(tmp_path / "tokens", "alice", hub.tokens["alice_write"])
    read = user_token(tmp_path / "other", "alice", hub.tokens["alice_read"])
    assert token_scope(write, settings, 0.0) == TokenScope("alice", ("alice", "colabq-org"))
    assert token_scope(read, settings, 0.0) == TokenScope("alice")
    token_scope(write, settings, 1.0)
    assert len(hub.requests("/api/whoami-v2")) == 2  # once per token while fresh


def test_the_gate_lets_her_write_her_places_and_refuses_bobs(hub: Hub, tmp_path: Path) -> None:
    folder = tmp_path / "tokens"
    user_token(folder, "alice", hub.tokens["alice_write"])
    settings = Settings(hf_endpoint=hub.url, hf_token_dir=folder, state_dir=tmp_path / "state")
    for repo in ("alice/runs", "colabq-org/runs"):
        check_destination(
            "alice", make_spec(artifact=hf_dest(repo), submitted_by="alice"), settings
        )
    with pytest.raises(UserInputError) as caught:
        check_destination("alice", make_spec(artifact=hf_dest("bob/runs")), settings)
    assert caught.value.advice().startswith(
        "hf:bob/runs is not alice's to use: alice's own token writes only alice, colabq-org. "
    )
    assert hub.tokens["alice_write"] not in caught.value.advice()
