"""Where a user's own Hub token may write, read from the Hub's `whoami-v2` answer as data (a
classic write token: its account and the orgs it writes in; a fine-grained one: what its scoped
permissions grant `repo.write`; a read token: nothing), and kept on the host for a while."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from worker.people.tokenscope import TokenScope, scope_of, token_scope
from worker.settings import Settings


def whoami(role: str, orgs: list[dict[str, Any]] | None = None, **token: Any) -> dict[str, Any]:
    access = {"displayName": "t", "role": role, **token}
    return {"type": "user", "name": "alice", "orgs": orgs or [],
            "auth": {"type": "access_token", "accessToken": access}}  # fmt: skip


def org(name: str, role: str | None) -> dict[str, Any]:
    return {"type": "org", "name": name, **({"roleInOrg": role} if role else {})}


def scoped(kind: str, name: str, *permissions: str) -> dict[str, Any]:
    return {"entity": {"_id": "x", "type": kind, "name": name}, "permissions": list(permissions)}


CASES = [
    ("a write token: its account and the orgs it writes in",
     whoami("write", [org("lab", "admin"), org("team", "write"), org("new", "contributor"),
                      org("readers", "read"), org("unsaid", None), org("bad/name", "write")]),
     TokenScope("alice", ("alice", "lab", "team", "new"))),
    ("a read token writes nothing", whoami("read", [org("lab", "admin")]), TokenScope("alice")),
    ("no role said: nothing", {"name": "alice", "orgs": [org("lab", "admin")]},
     TokenScope("alice")),
    ("a fine-grained token: what its scoped permissions grant repo.write",
     whoami("fineGrained", fineGrained={"global": ["repo.write"], "scoped": [
         scoped("user", "alice", "repo.content.read", "repo.write"),
         scoped("org", "lab", "repo.content.read"),
         scoped("org", "team", "repo.write"),
         scoped("model", "bob/shared", "repo.write"),
         scoped("dataset", "../etc", "repo.write"),
         "junk",
     ]}),
     TokenScope("alice", ("alice", "team"), ("model:bob/shared",))),
    ("an answer of the wrong shape is trusted for nothing",
     {"name": "alice", "orgs": "lab", "auth": {"accessToken": "write"}}, TokenScope("alice")),
]  # fmt: skip


@pytest.mark.parametrize(("answer", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_scope_of_a_token(answer: dict[str, Any], expected: TokenScope) -> None:
    assert scope_of(answer) == expected


def test_what_a_scope_may_write() -> None:
    scope = TokenScope("alice", ("alice", "team"), ("model:bob/shared",))
    assert scope.can_write("team/x", "dataset") and scope.can_write("bob/shared", "model")
    assert not scope.can_write("bob/shared", "dataset") and not scope.can_write("bob/x", "model")
    assert scope.describe() == "alice, team, bob/shared"
    assert TokenScope("alice").describe() == "nothing (a read token)"


def test_a_scope_is_kept_on_the_host_for_a_while_never_with_its_token(tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path / "state", hf_scope_cache_s=600)
    token = tmp_path / "alice"
    token.write_text("hf_alice_secret\n")
    asked: list[str] = []

    def ask(value: str) -> dict[str, Any]:
        asked.append(value)
        return whoami("write", [org("lab", "write")])

    first = token_scope(token, settings, 1000.0, ask)
    assert (
        token_scope(token, settings, 1599.0, ask) == first == TokenScope("alice", ("alice", "lab"))
    )
    assert asked == ["hf_alice_secret"]
    [kept] = (settings.state_dir / "hub-scopes").iterdir()
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and "hf_alice_secret" not in kept.read_text()
    assert token_scope(token, settings, 1600.0, ask) == first  # expired: asked again
    assert len(asked) == 2
    # A cache file someone broke is asked again, never trusted.
    kept.write_text(json.dumps({"at": 1600.0, "scope": {"account": 1}}))
    token_scope(token, settings, 1601.0, ask)
    assert len(asked) == 3
