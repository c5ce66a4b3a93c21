"""The Hub token a job's uploads use, chosen on the worker host before allocation by its
destination and its user together (`worker.people.destinations`: tests/unit/test_destinations.py
has the rule's table): the worker trusts no gate, its user is the owner in the job's id; a bad
chosen file, or none where one is needed, is this host's failure in one line naming the file;
another user's destination is the job's, in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.factories import make_spec
from worker.errors import SecretFileError
from worker.fleet.causes import Cause, cause_of
from worker.people.tokenscope import TokenScope
from worker.session import hubtoken
from worker.settings import Settings
from worker.spec import ArtifactDest

HUB = ArtifactDest(kind="hf", repo="alice-lab/detr", prefix="runs/1")


def token(path: Path, text: str = "hf_x", mode: int = 0o600) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "tokens"


def scope(path: Path) -> TokenScope:
    return TokenScope(path.name, (path.name, f"{path.name}-lab"))


def test_the_destinations_token_then_the_users_then_the_hosts(tmp_path: Path, folder: Path) -> None:
    """Without ACLs (a plain job id), as before: every token serves every user it may."""
    host = token(tmp_path / "host")
    settings = Settings(hf_token_file=host, hf_token_dir=folder)
    spec = make_spec(artifact=HUB, submitted_by="Alice@laptop")
    assert hubtoken.choose(spec, settings, scope).whose == "host"
    user = token(folder / "user" / "alice")
    assert hubtoken.choose(spec, settings, scope) == hubtoken.HubToken(
        user, "user", (folder / "dest" / "alice-lab__detr", user)
    )
    dest = token(folder / "dest" / "alice-lab__detr")
    chosen = hubtoken.choose(spec, settings, scope)
    assert (chosen.path, chosen.whose) == (dest, "destination")
    assert chosen.describe() == f"the destination's Hub token ({dest})"
    # Another user's job to another repo: the host's.
    other = make_spec(artifact=HUB.model_copy(update={"repo": "bob/x"}), submitted_by="bob@h")
    assert hubtoken.choose(other, settings, scope).path == host


def test_an_owned_job_never_gets_another_users_destination(tmp_path: Path, folder: Path) -> None:
    """Under ACLs the job's owner is its user, whatever a gate let through: bob's repo, which
    has its own token for bob alone, is refused before allocation, and that is the job's fault."""
    token(folder / "dest" / "bob__model")
    token(folder / "dest" / "bob__model.users", "bob\n", 0o644)
    token(folder / "user" / "alice")
    settings = Settings(hf_token_dir=folder, hf_token_file=token(tmp_path / "host"))
    bobs = HUB.model_copy(update={"repo": "bob/model"})
    spec = make_spec(job_id="0123456789abcdef.alice", submitted_by="alice", artifact=bobs,
                     secrets=("hf_token",))  # fmt: skip
    with pytest.raises(hubtoken.NotYourDestination) as caught:
        hubtoken.choose(spec, settings, scope)
    assert caught.value.advice().startswith("hf:bob/model is not alice's to use: ")
    assert cause_of(caught.value) is Cause.JOB
    assert hubtoken.token_path(spec, settings, scope) is None  # never raises
    mine = make_spec(job_id="0123456789abcdef.bob", submitted_by="bob", artifact=bobs)
    assert hubtoken.choose(mine, settings, scope).whose == "destination"


def test_a_bad_chosen_file_is_this_hosts_failure_and_never_falls_back(
    tmp_path: Path, folder: Path
) -> None:
    settings = Settings(hf_token_file=token(tmp_path / "host"), hf_token_dir=folder)
    bad = token(folder / "user" / "alice", mode=0o644)
    with pytest.raises(SecretFileError) as caught:
        hubtoken.choose(make_spec(artifact=HUB, submitted_by="alice@laptop"), settings)
    assert caught.value.advice() == (
        f"The user's token file {bad} has mode 0644; run `chmod 600 {bad}`."
    )
    assert cause_of(caught.value) is Cause.HOST
    empty = token(folder / "user" / "carol", text="")
    with pytest.raises(SecretFileError, match=f"{empty} is empty"):
        hubtoken.choose(make_spec(submitted_by="carol"), settings)


def test_no_token_where_one_is_needed_names_the_files_expected(folder: Path) -> None:
    spec = make_spec(artifact=HUB, submitted_by="alice@laptop")
    with pytest.raises(hubtoken.NoHubToken) as caught:
        hubtoken.choose(spec, Settings(hf_token_dir=folder))
    assert caught.value.advice() == (
        "a Hub destination needs a Hub token on the worker host: none of "
        f"{folder}/dest/alice-lab__detr or {folder}/user/alice exists"
    )
    # As before, without a token folder.
    with pytest.raises(hubtoken.NoHubToken, match=r"^a Hub destination needs COLABQ_HF_TOKEN_FILE"):
        hubtoken.choose(spec, Settings())
    asks = make_spec(secrets=("hf_token",), submitted_by="")
    with pytest.raises(hubtoken.NoHubToken, match=r"^secrets: \[hf_token\] needs"):
        hubtoken.choose(asks, Settings(hf_token_dir=folder))
    # A local destination that asks for nothing needs no token.
    assert hubtoken.choose(make_spec(), Settings(hf_token_dir=folder)).path is None
    assert hubtoken.token_path(spec, Settings(hf_token_dir=folder)) is None  # never raises


@pytest.mark.parametrize(
    ("submitted_by", "key"),
    [("alice@laptop", "alice"), ("Alice", "alice"), ("a b/../c@h", "a_b_.._c"), ("", None),
     ("@host", None), ("..@h", None), ("svc-ci_2", "svc-ci_2")],
)  # fmt: skip
def test_the_users_file_name(submitted_by: str, key: str | None) -> None:
    assert hubtoken.user_key(submitted_by) == key


def test_the_destinations_file_name() -> None:
    assert hubtoken.dest_key("alice-lab/detr.v2") == "alice-lab__detr.v2"
