"""Tokens belong to owners: the gate's `check_destination` (and the worker's choice, the same
rule) gives a job a token only of its own destination and user: a destination's token to the
users listed beside it, a user's own token for the places its whoami writes, the host's token
to the users listed beside it. Another user's destination is refused in one line; local
folders must lie under the operator's root. The Hub's whoami is a fake here (tests/hub_store
asks the local Hub)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.factories import make_spec
from worker.errors import SecretFileError, UserInputError
from worker.people import destinations as d
from worker.people.tokenscope import TokenScope
from worker.settings import Settings
from worker.spec import ArtifactDest, CodeSpec, JobSpec

BOB_MODEL = ArtifactDest(kind="hf", repo="bob/model", prefix="runs/1")
LAB = ArtifactDest(kind="hf", repo="alice-lab/detr", prefix="runs/1")
SCOPES = {"alice": TokenScope("alice", ("alice", "alice-lab")), "bob": TokenScope("bob", ("bob",))}
ALICE = d.JobUser("alice", authenticated=True)


def write(path: Path, text: str, mode: int = 0o600) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


@dataclass
class Case:
    name: str
    user: d.JobUser
    artifact: ArtifactDest
    files: dict[str, str]  # under the token folder ("host" is COLABQ_HF_TOKEN_FILE)
    whose: str | None  # the grant's, or None: refused
    secrets: tuple[str, ...] = ()
    refusal: tuple[str, ...] = field(default=())  # parts of the one line


def spec_for(case: Case) -> JobSpec:
    return make_spec(artifact=case.artifact, secrets=case.secrets, submitted_by="x@laptop")


CASES = [
    Case("another user's destination token, even with her own token", ALICE, BOB_MODEL,
         {"dest/bob__model": "hf_bob", "dest/bob__model.users": "bob\n", "user/alice": "hf_a"},
         None, refusal=("hf:bob/model is not alice's to use", "bob__model.users does not list",
                        "alice's own token writes only alice, alice-lab")),
    Case("asking for the token by name changes nothing", ALICE, BOB_MODEL,
         {"dest/bob__model": "hf_bob", "dest/bob__model.users": "bob\n"}, None,
         secrets=("hf_token",), refusal=("hf:bob/model is not alice's to use",)),
    Case("the destination's token for a user its list names", d.JobUser("bob", True), BOB_MODEL,
         {"dest/bob__model": "hf_bob", "dest/bob__model.users": "# team\nBob  # him\n"},
         "destination"),
    Case("a list of everyone", ALICE, BOB_MODEL,
         {"dest/bob__model": "hf_bob", "dest/bob__model.users": "*\n"}, "destination"),
    Case("under ACLs a destination's token without a list serves nobody", ALICE, BOB_MODEL,
         {"dest/bob__model": "hf_bob"}, None, refusal=("bob__model.users does not list",)),
    Case("without ACLs it serves everyone, as before", d.JobUser("alice", False), BOB_MODEL,
         {"dest/bob__model": "hf_bob"}, "destination"),
    Case("her own token where its whoami writes", ALICE, LAB, {"user/alice": "hf_a"}, "user"),
    Case("her own token, not where it cannot write", ALICE, BOB_MODEL, {"user/alice": "hf_a"},
         None, refusal=("alice's own token writes only alice, alice-lab",)),
    Case("the host's token for the users listed beside it", ALICE, BOB_MODEL,
         {"host": "hf_h", "host.users": "carol\nalice\n"}, "host"),
    Case("under ACLs the host's token without a list serves nobody", ALICE, LAB, {"host": "hf_h"},
         None, refusal=("host.users does not list",)),
    Case("never the host's token for a repo that has its own", ALICE, BOB_MODEL,
         {"host": "hf_h", "host.users": "*\n", "dest/bob__model": "hf_bob",
          "dest/bob__model.users": "bob\n"}, None),
    Case("a local job needs no token: none it may not have", ALICE,
         ArtifactDest(kind="local", repo="/s"), {"host": "hf_h"}, "none"),
    Case("a local job asking for hf_token gets her own", ALICE,
         ArtifactDest(kind="local", repo="/s"), {"host": "hf_h", "user/alice": "hf_a"}, "user",
         secrets=("hf_token",)),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_token_serves_only_its_destination_and_its_users(case: Case, tmp_path: Path) -> None:
    folder = tmp_path / "tokens"
    for name, text in case.files.items():
        path = tmp_path / name if name.startswith("host") else folder / name
        write(path, text, 0o644 if name.endswith(".users") else 0o600)
    host = tmp_path / "host" if "host" in case.files else None
    settings = Settings(hf_token_dir=folder, hf_token_file=host, state_dir=tmp_path / "state")
    spec = spec_for(case)

    def scope(path: Path) -> TokenScope:
        return SCOPES[path.name]

    if case.whose is not None:
        assert d.choose(case.user, spec, settings, scope).whose == case.whose
        return
    with pytest.raises(d.NotYourDestination) as caught:
        d.choose(case.user, spec, settings, scope)
    line = caught.value.advice()
    assert "\n" not in line and all(part in line for part in case.refusal), line
    assert "hf_bob" not in line and "hf_h" not in line  # paths, never a token


def test_a_list_others_may_write_is_this_hosts_failure(tmp_path: Path) -> None:
    write(tmp_path / "tokens" / "dest" / "bob__model", "hf_bob")
    users = write(tmp_path / "tokens" / "dest" / "bob__model.users", "alice\n", 0o664)
    with pytest.raises(SecretFileError, match=f"^{users} is writable by others; run `chmod"):
        d.choose(ALICE, make_spec(artifact=BOB_MODEL), Settings(hf_token_dir=tmp_path / "tokens"))


def test_the_gate_refuses_another_users_destination_in_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "tokens"
    write(folder / "dest" / "bob__model", "hf_bob")
    write(folder / "dest" / "bob__model.users", "bob\n", 0o644)
    settings = Settings(hf_token_dir=folder, state_dir=tmp_path / "state")
    with pytest.raises(UserInputError) as caught:
        d.check_destination("alice", make_spec(artifact=BOB_MODEL), settings)
    assert caught.value.advice().startswith("hf:bob/model is not alice's to use: ")
    d.check_destination("bob", make_spec(artifact=BOB_MODEL, submitted_by="bob"), settings)
    # No token for the pair anywhere on the deployment: refused at submit too.
    with pytest.raises(UserInputError, match="no worker host can upload for alice"):
        d.check_destination("alice", make_spec(artifact=LAB), settings)
    # A gate host with no Hub token setting cannot judge tokens: the worker will.
    d.check_destination("alice", make_spec(artifact=BOB_MODEL), Settings())


def test_without_acls_the_user_is_who_the_submitting_machine_said(tmp_path: Path) -> None:
    folder = tmp_path / "tokens"
    write(folder / "dest" / "bob__model", "hf_bob")
    write(folder / "dest" / "bob__model.users", "bob\n", 0o644)
    settings = Settings(hf_token_dir=folder)
    d.check_destination("default", make_spec(artifact=BOB_MODEL, submitted_by="Bob@h"), settings)
    with pytest.raises(d.NotYourDestination):
        d.check_destination(
            "default", make_spec(artifact=BOB_MODEL, submitted_by="eve@h"), settings
        )


SHA = "0123456789abcdef0123456789abcdef01234567"


def local(repo: str, snapshot: str | None = None) -> JobSpec:
    code = CodeSpec(mode="snapshot", commit=SHA, snapshot=snapshot) if snapshot else None
    return make_spec(artifact=ArtifactDest(kind="local", repo=repo), code=code, commit=SHA)


def test_local_folders_lie_under_the_operators_root(tmp_path: Path) -> None:
    root = tmp_path / "stores"
    (root / "alice").mkdir(parents=True)
    (root / "out").symlink_to("/etc")
    under = Settings(local_store_root=root)
    d.check_destination("alice", local(f"{root}/alice/run1"), under)
    d.check_destination("alice", local(f"{root}/a", f"file://{root}/code/{SHA}.tar.gz"), under)
    refused = [
        (local("/etc/cron.d"), under, "The local store /etc/cron.d is outside"),
        (local(f"{root}/../x"), under, "is outside"),
        (local(f"{root}/out/x"), under, "is outside"),  # a link under the root leads out
        (local("relative/x"), under, "is outside"),
        (local(f"{root}/a", "file:///etc/shadow"), under, "The code snapshot /etc/shadow"),
        (local(f"{root}/a"), Settings(), "no folder is open to users until an operator sets"),
    ]
    for spec, settings, part in refused:
        with pytest.raises(UserInputError) as caught:
            d.check_destination("alice", spec, settings)
        assert part in caught.value.advice() and "\n" not in caught.value.advice()
    # Without ACLs and without a root: anywhere, as before.
    d.check_destination("default", local("/tmp/anywhere"), Settings())
