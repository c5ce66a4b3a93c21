"""The worker host's check of a job's code before allocation (`worker.session.codecheck`),
against real git: a bare repository on disk (a file:// URL and a plain path), a smart-HTTP
server that wants a credential, a closed port, a server that never answers."""

from __future__ import annotations

import os
import shutil
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gitremote import Remote, git_http_server, make_remote
from worker.errors import HubNotFound, HubUnavailable, SecretFileError
from worker.session.checks import check_git_credentials, worker_host_problem
from worker.session.codecheck import (
    CodeCheckFailed,
    CodeHostFailure,
    check_code,
    check_git,
    check_snapshot,
    credential_secrets,
    git_said,
    judge,
    scrub,
)
from worker.settings import Settings
from worker.spec import CodeSpec

JOB = "0123456789abcdef"
CANARY = "ghp_canary_7f3e9a1b5c2d"  # a password git-credential-store holds URL-encoded


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Remote:
    return make_remote(tmp_path_factory.mktemp("remote"))


def git_code(commit: str, remote: str) -> CodeSpec:
    return CodeSpec(mode="git", commit=commit, remote=remote)


def check(code: CodeSpec, tmp_path: Path, credentials: Path | None = None, **kw: float) -> str:
    return check_git(
        code, job_id=JOB, host="w1@gpu-box", credentials=credentials, workdir=tmp_path / "job",
        **kw,
    )  # fmt: skip


def write_credentials(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


@pytest.mark.parametrize("form", ["file-url", "path"])
def test_a_pushed_commit_passes_and_an_unpushed_one_is_the_jobs_failure(
    remote: Remote, tmp_path: Path, form: str
) -> None:
    where = remote.url if form == "file-url" else str(remote.bare)
    assert check(git_code(remote.pushed, where), tmp_path) == (
        f"code: commit {remote.pushed[:12]} is on {where}"
    )
    with pytest.raises(CodeCheckFailed) as failed:
        check(git_code(remote.unpushed, where), tmp_path)
    assert str(failed.value) == (
        f"commit {remote.unpushed[:12]} is not on {where}: push it, then `colabq retry {JOB}`"
    )
    assert list((tmp_path / "job").iterdir()) == []  # the scratch repository is gone


def test_a_remote_that_is_no_repository_is_the_jobs_failure(tmp_path: Path) -> None:
    where = str(tmp_path / "nothing.git")
    with pytest.raises(CodeCheckFailed) as failed:
        check(git_code("a" * 40, where), tmp_path)
    line = str(failed.value)
    assert line.startswith(f"worker host w1@gpu-box cannot read {where} (")
    assert "does not appear to be a git repository" in line and "\n" not in line
    assert "COLABQ_GIT_CREDENTIALS_FILE" in line and f"`colabq retry {JOB}`" in line


@pytest.fixture
def git_argv_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every git process started through PATH (the check's, and the credential helper's `git
    credential-store`) logs its command line and environment here first."""
    log, bin_dir = tmp_path / "git-argv.log", tmp_path / "bin"
    bin_dir.mkdir()
    real = shutil.which("git")
    assert real
    shim = bin_dir / "git"
    shim.write_text(f'#!/bin/sh\n{{ echo "ARGV $*"; env; }} >> "{log}"\nexec "{real}" "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    yield log


@pytest.mark.parametrize("given", ["none", "refused", "accepted"])
def test_an_http_remote_that_wants_a_credential(
    remote: Remote, tmp_path: Path, git_argv_log: Path, given: str
) -> None:
    with git_http_server(remote.bare.parent, "alice", CANARY) as server:
        where = server.url(remote.bare.name)
        creds = None
        if given != "none":
            password = CANARY.replace("_", "%5F") if given == "accepted" else "wrong-password"
            stored = f"http://alice:{password}@127.0.0.1:{server.port}\n"
            creds = write_credentials(tmp_path / "git-credentials", stored)
        if given == "accepted":
            assert check(git_code(remote.pushed, where), tmp_path, creds).endswith(where)
            with pytest.raises(CodeCheckFailed, match="is not on"):
                check(git_code(remote.unpushed, where), tmp_path, creds)
            assert server.offered and set(server.offered) == {f"alice:{CANARY}"}
        else:
            with pytest.raises(CodeCheckFailed) as failed:
                check(git_code(remote.pushed, where), tmp_path, creds)
            line = str(failed.value)
            assert line.startswith(f"worker host w1@gpu-box cannot read {where} (")
            assert "COLABQ_GIT_CREDENTIALS_FILE (git-credential-store format)" in line
            assert CANARY not in line and "wrong-password" not in line
            assert server.offered == ([] if given == "none" else ["alice:wrong-password"])
    if creds is not None:
        # Never erased after a refusal, never rewritten after a success: only read.
        assert creds.read_text() == stored and stat.S_IMODE(creds.stat().st_mode) == 0o600
    log = git_argv_log.read_text()
    assert "ARGV" in log and ("credential-store" in log) is (creds is not None)
    for secret in (CANARY, CANARY.replace("_", "%5F"), "wrong-password"):
        assert secret not in log


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_remote_is_this_hosts_failure(tmp_path: Path) -> None:
    where = f"http://127.0.0.1:{closed_port()}/project.git"
    with pytest.raises(CodeHostFailure) as failed:
        check(git_code("b" * 40, where), tmp_path)
    assert str(failed.value).startswith(f"cannot reach {where} to check commit bbbbbbbbbbbb: ")
    assert isinstance(failed.value, ConnectionError)


def test_a_remote_that_never_answers_is_killed_at_the_timeout(tmp_path: Path) -> None:
    with socket.socket() as silent:  # accepts connections (its backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        where = f"http://127.0.0.1:{silent.getsockname()[1]}/project.git"
        with pytest.raises(CodeHostFailure, match=r"did not finish in 1s"):
            check(git_code("c" * 40, where), tmp_path, timeout_s=1.0)


def test_git_missing_is_this_hosts_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(CodeHostFailure, match="git is not installed"):
        check(git_code("d" * 40, "/srv/repo.git"), tmp_path)


SAID = [
    # (git's stderr, the verdict): each verdict beside words that must not give it.
    ("fatal: remote error: upload-pack: not our ref " + "e" * 40, "missing"),
    ("fatal: couldn't find remote ref refs/heads/x", "missing"),
    ("error: Server does not allow request for unadvertised object " + "e" * 40, "missing"),
    (
        "remote: Repository not found.\nfatal: repository 'https://github.com/a/b.git/' not found",
        "refused",
    ),
    ("fatal: Authentication failed for 'https://gitlab.com/a/b.git/'", "refused"),
    (
        "fatal: unable to access 'https://h/a.git/': The requested URL returned error: 403",
        "refused",
    ),
    (
        "git@github.com: Permission denied (publickey).\nfatal: Could not read from remote "
        "repository.\n\nPlease make sure you have the correct access rights\nand the repository "
        "exists.",
        "refused",
    ),
    (
        "ssh: connect to host h port 22: Connection refused\nfatal: Could not read from remote "
        "repository.",
        "unreachable",
    ),
    ("ssh: Could not resolve hostname h: Temporary failure in name resolution", "unreachable"),
    ("fatal: unable to access 'https://h/a.git/': Could not resolve host: h", "unreachable"),
    (
        "fatal: unable to access 'https://h/a.git/': The requested URL returned error: 502",
        "unreachable",
    ),
    ("fatal: the remote end hung up in a way nobody expected", "unknown"),
]


@pytest.mark.parametrize(("stderr", "verdict"), SAID)
def test_what_gits_words_mean(stderr: str, verdict: str) -> None:
    assert judge(stderr, "https://h/a.git") == verdict


def test_a_remote_named_like_an_error_is_judged_by_gits_words_alone() -> None:
    remote = "https://h/timed-out/forbidden.git"
    assert judge(f"fatal: remote error: upload-pack: not our ref x from {remote}", remote) == (
        "missing"
    )
    assert judge(f"fatal: could not fetch {remote}", remote) == "unknown"


def test_gits_reason_is_one_short_line() -> None:
    stderr = (
        "warning: filtering not recognized by server, ignoring\nhint: x\n"
        "ssh: connect to host h port 22: Connection refused\n"
        "fatal: Could not read from remote repository.\n\n"
        "Please make sure you have the correct access rights\nand the repository exists.\n"
    )
    assert git_said(stderr) == (
        "ssh: connect to host h port 22: Connection refused; Could not read from remote repository."
    )
    assert len(git_said("fatal: " + "x" * 1000)) == 240 and git_said("") == "no output"


def test_the_credential_is_scrubbed_in_every_form_it_is_written(tmp_path: Path) -> None:
    creds = write_credentials(
        tmp_path / "c", f"https://bob:{CANARY.replace('_', '%5F')}@github.com\n\nnot a url\n"
    )
    secrets = credential_secrets(creds)
    text = f"a {CANARY} b {CANARY.replace('_', '%5F')} c bob:{CANARY}"
    scrubbed = scrub(text, secrets)
    assert CANARY not in scrubbed and "%5F" not in scrubbed and "***" in scrubbed
    assert credential_secrets(None) == [] and credential_secrets(tmp_path / "gone") == []


SNAPSHOTS = [
    # (what is at the URI, what the input check says, passes)
    ("archive", None, True),
    ("missing", None, False),
    ("empty", None, False),
    ("folder", None, False),
    ("hub", 2048, True),
    ("hub", HubNotFound("hf://a/b/code/x.tar.gz"), False),
]


@pytest.mark.parametrize(("what", "hub", "passes"), SNAPSHOTS, ids=[s[0] for s in SNAPSHOTS])
def test_a_snapshot_must_be_staged_and_hold_data(
    tmp_path: Path, what: str, hub: int | Exception | None, passes: bool
) -> None:
    archive = tmp_path / "store" / "code" / ("f" * 40 + ".tar.gz")
    archive.parent.mkdir(parents=True)
    if what == "archive":
        archive.write_bytes(b"\x1f\x8b" + b"x" * 100)
    elif what == "empty":
        archive.touch()
    elif what == "folder":
        archive.mkdir()
    uri = "hf://datasets/alice/runs/code/x.tar.gz" if what == "hub" else archive.as_uri()

    def check_input(asked: str) -> int:
        assert asked == uri
        if isinstance(hub, Exception):
            raise hub
        return hub or 0

    code = CodeSpec(mode="snapshot", commit="f" * 40, snapshot=uri)

    def run() -> str:
        return check_code(
            code, job_id=JOB, host="h", credentials=None, workdir=tmp_path, check_input=check_input
        )

    if passes:
        assert run() == f"code: snapshot {uri} ({102 if what == 'archive' else 2048} bytes)"
    else:
        with pytest.raises(CodeCheckFailed) as failed:
            run()
        assert str(failed.value) == f"the code snapshot {uri} is missing: submit again to stage it"


def test_a_hub_outage_during_the_snapshot_check_is_not_the_jobs() -> None:
    def down(uri: str) -> int:
        raise HubUnavailable("inspect", 3, 503, "down")

    with pytest.raises(HubUnavailable):  # classed as the host's by `cause_of`
        check_snapshot("hf://alice/runs/code/x.tar.gz", down)


BAD_FILES = [
    ("mode 0644", "https://u:t@h\n", 0o644, "has mode 0644; run `chmod 600"),
    ("empty", "", 0o600, "is empty"),
    ("a line without a password", "https://u:t@h\nhttps://u@github.com\n", 0o600, "line 2 is not"),
    ("a line that is no URL", "ghp_just_a_token\n", 0o600, "line 1 is not https://USER:TOKEN@HOST"),
]


@pytest.mark.parametrize(("why", "text", "mode", "said"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_bad_credentials_file_stops_the_worker_in_one_line(
    tmp_path: Path, why: str, text: str, mode: int, said: str
) -> None:
    creds = tmp_path / "git-credentials"
    creds.write_text(text)
    creds.chmod(mode)
    with pytest.raises(SecretFileError, match=said):
        check_git_credentials(creds)
    settings = Settings(state_dir=tmp_path / "state", git_credentials_file=creds)
    problem = worker_host_problem(settings)
    assert problem is not None and problem.startswith(f"Git credentials file {creds} ")
    assert problem.endswith("(COLABQ_GIT_CREDENTIALS_FILE)") and said in problem
    assert "ghp_just_a_token" not in problem and "u:t" not in problem


def test_a_good_credentials_file_passes(tmp_path: Path) -> None:
    creds = write_credentials(tmp_path / "c", "https://u:tok@github.com\n\nhttps://v:x@h:8443/p\n")
    check_git_credentials(creds)
