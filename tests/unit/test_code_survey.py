"""The repository a job ships, as `producer.code` sees it: the commit, the remote and whether the
commit is on it, the includes of a snapshot, the uv pin, and the findings made of them. Real git
repositories in tmp_path with a local bare remote; no network."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from producer.code import gitrepo
from producer.code.checks import code_finding, environment_finding
from producer.code.snapshot import build_archive
from producer.code.survey import CodeRequest, survey
from producer.code.uvcheck import python_pin
from producer.preflight.report import Verdict
from tests.cli.code_repo import commit_all, git
from worker.errors import UserInputError


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository (no uv project) with `train.sh` and `sub/job.sh`, pushed to `origin`."""
    root = tmp_path / "repo"
    (root / "sub").mkdir(parents=True)
    (root / "train.sh").write_text("echo train\n")
    (root / "sub" / "job.sh").write_text("echo job\n")
    git(root, "init", "-q", "-b", "main")
    commit_all(root, "first")
    git(tmp_path, "init", "-q", "--bare", "remote.git")
    git(root, "remote", "add", "origin", str(tmp_path / "remote.git"))
    git(root, "push", "-q", "-u", "origin", "main")
    return root


def test_an_ancestor_of_a_pushed_ref_is_on_the_remote_and_a_local_commit_is_not(
    repo: Path,
) -> None:
    first = git(repo, "rev-parse", "HEAD")
    (repo / "train.sh").write_text("echo two\n")
    commit_all(repo, "second")
    git(repo, "push", "-q")
    (repo / "train.sh").write_text("echo three\n")
    third = commit_all(repo, "third, local")
    remote = gitrepo.remote_of(repo)
    assert gitrepo.on_remote(repo, remote, first).found is True  # below the branch's tip
    assert gitrepo.on_remote(repo, remote, third) == gitrepo.OnRemote(False)
    state = survey(CodeRequest("git", repo, rev=first))
    assert (state.commit, state.is_head, state.dirty) == (first, False, ())
    assert code_finding(state).verdict is Verdict.PASS

    git(repo, "remote", "set-url", "origin", str(repo.parent / "gone.git"))
    gone = survey(CodeRequest("git", repo))
    assert gone.on_remote is not None and gone.on_remote.found is None
    finding = code_finding(gone)
    assert finding.verdict is Verdict.FAIL and "could not list origin's refs" in finding.saw


def test_the_upstream_remote_is_preferred_and_a_credential_in_its_url_is_refused(
    repo: Path,
) -> None:
    git(repo, "remote", "add", "fork", "https://alice:s3cret-token@example.com/alice/r.git")
    git(repo, "config", "branch.main.remote", "fork")
    with pytest.raises(UserInputError) as refused:
        gitrepo.remote_of(repo)
    message = str(refused.value)
    assert "s3cret" not in message and "alice:" not in message
    assert message.startswith("The remote fork's URL carries a credential")
    assert "git remote set-url fork https://example.com/alice/r.git" in message
    git(repo, "remote", "set-url", "fork", "git@example.com:alice/r.git")
    assert gitrepo.remote_of(repo) == gitrepo.Remote("fork", "git@example.com:alice/r.git")
    git(repo, "config", "--unset", "branch.main.remote")
    git(repo, "remote", "remove", "origin")
    with pytest.raises(UserInputError, match="has no remote 'origin'"):
        gitrepo.remote_of(repo)


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (lambda r: CodeRequest("git", r, rev="no-such-branch"), "--commit no-such-branch: no such"),
        (lambda r: CodeRequest("snapshot", r, include=("train.sh",)), "is in commit"),
        (lambda r: CodeRequest("snapshot", r, include=("absent",)), "does not exist"),
        (lambda r: CodeRequest("snapshot", r, include=("../x",)), "inside"),
        (lambda r: CodeRequest("git", r, include=("w",)), "include: adds untracked files"),
        (lambda r: CodeRequest("svn", r), "use git or snapshot"),
        (lambda r: CodeRequest("git", r.parent), "is not in a git repository"),
    ],
)
def test_what_cannot_be_shipped_is_one_line(repo: Path, request_, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UserInputError, match=message.replace("(", r"\(")) as refused:
        survey(request_(repo))
    assert "\n" not in str(refused.value)


def test_a_snapshot_of_a_subfolder_is_the_whole_commit_and_deterministic(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "sub" / "data.bin").write_bytes(b"untracked")
    state = survey(CodeRequest("snapshot", repo / "sub", include=("data.bin",)))
    assert state.subdir == "sub" and [i.arcname for i in state.includes] == ["sub/data.bin"]
    assert state.files == 4  # train.sh, sub/job.sh, sub/data.bin, .colabq-commit
    sums = set()
    for name in ("a.tar.gz", "b.tar.gz"):
        assert build_archive(state.top, state.commit, state.includes, tmp_path / name) == 4
        sums.add(hashlib.sha256((tmp_path / name).read_bytes()).hexdigest())
    assert len(sums) == 1  # the same archive, byte for byte: its name can say what it holds


def test_the_environment_of_a_project_without_a_lock_warns(repo: Path) -> None:
    (repo / "sub" / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "0"\n')
    commit_all(repo, "pyproject, no lock")
    state = survey(CodeRequest("snapshot", repo / "sub"))
    assert not state.env.uv and state.env.pyproject_only
    finding = environment_finding(state)
    assert finding.verdict is Verdict.WARN and "run `uv lock`" in finding.next_action
    assert environment_finding(None).verdict is Verdict.PASS  # no code: nothing to build


@pytest.mark.parametrize(
    ("python_version", "pyproject", "pin"),
    [
        ("# pinned\n3.12\n", None, "3.12"),
        (None, '[project]\nrequires-python = ">=3.10"\n', ">=3.10"),
        ("", '[project]\nname = "x"\n', ""),
        (None, "not = [toml", ""),
    ],
)
def test_the_python_pin(python_version: str | None, pyproject: str | None, pin: str) -> None:
    assert python_pin(python_version, pyproject) == pin
