"""The worker host's pre-allocation fetch of an ssh remote takes the route the VM will take
(`worker.session.gitroute`): over https where the host holds a credential for the remote's host,
else with its deploy key alone (a fake `ssh` on PATH stands for the forge and records the call),
else not at all; and a deploy key file that would fail every fetch stops the worker in one
line, never showing the key."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.gitremote import FakeSsh, canary_key, fake_ssh, make_remote
from worker.errors import SecretFileError
from worker.session.checks import check_ssh_key, worker_host_problem
from worker.session.codecheck import CodeCheckFailed, CodeHostFailure, check_git
from worker.session.gitroute import NoGitRoute
from worker.settings import Settings
from worker.spec import CodeSpec

JOB = "0123456789abcdef"
REMOTE = "git@git.test:org/project.git"


def check(remote: str, commit: str, tmp_path: Path, **kw: Path | None) -> str:
    return check_git(
        CodeSpec(mode="git", commit=commit, remote=remote), job_id=JOB, host="w1@gpu-box",
        workdir=tmp_path / "job", credentials=kw.get("credentials"), ssh_key=kw.get("ssh_key"),
    )  # fmt: skip


@pytest.fixture
def forge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path, str, FakeSsh]:
    """git.test serving org/project.git to the worker's deploy key alone: the pushed commit,
    the key, its text, and the fake ssh (first on PATH)."""
    remote = make_remote(tmp_path / "forge" / "org")
    key = tmp_path / "deploy-key"
    needle = canary_key(key, "worker-deploy-key")
    ssh = fake_ssh(tmp_path / "ssh", tmp_path / "forge", "git.test", key)
    monkeypatch.setenv("PATH", f"{ssh.bin_dir}:{os.environ['PATH']}")
    monkeypatch.delenv("GIT_SSH_COMMAND", raising=False)
    return remote.pushed, key, needle, ssh


def test_the_check_fetches_with_the_deploy_key_alone_as_the_vm_will(
    tmp_path: Path, forge: tuple[str, Path, str, FakeSsh]
) -> None:
    commit, key, needle, ssh = forge
    line = check(REMOTE, commit, tmp_path, ssh_key=key)
    assert line == f"code: commit {commit[:12]} is on {REMOTE} over ssh with this host's deploy key"
    [call] = ssh.calls()
    argv = call["argv"]
    assert isinstance(argv, list) and argv[argv.index("-i") + 1] == str(key)
    options = call["options"]
    assert isinstance(options, list)
    assert {"IdentitiesOnly=yes", "BatchMode=yes", "StrictHostKeyChecking=accept-new"} <= set(
        options
    )
    known = [o for o in options if o.startswith("UserKnownHostsFile=")]
    assert call["known_hosts"] == ["bitbucket.org", "github.com", "gitlab.com"]
    assert not Path(known[0].split("=", 1)[1]).exists()  # the check's scratch, gone
    assert needle not in json.dumps(call) and needle in key.read_text()  # the host's, untouched


def test_a_refused_deploy_key_is_the_jobs_failure_saying_what_to_do(
    tmp_path: Path, forge: tuple[str, Path, str, FakeSsh]
) -> None:
    commit, _, _, _ = forge
    other = tmp_path / "other-key"
    canary_key(other, "not-the-deploy-key")
    with pytest.raises(CodeCheckFailed) as caught:
        check(REMOTE, commit, tmp_path, ssh_key=other)
    line = caught.value.advice()
    assert line.startswith(f"worker host w1@gpu-box cannot read {REMOTE} with its deploy key (")
    assert "read-only deploy key" in line and "COLABQ_GIT_SSH_KEY_FILE" in line
    assert line.endswith(f"then `colabq retry {JOB}`") and "\n" not in line


def test_a_covered_host_is_checked_over_https_with_the_credential(tmp_path: Path) -> None:
    creds = tmp_path / "git-credentials"
    creds.write_text("https://u:ghp_secret@git.invalid\n")
    creds.chmod(0o600)
    with pytest.raises(CodeHostFailure) as caught:  # .invalid never resolves: the URL tried
        check("git@git.invalid:org/repo.git", "0" * 40, tmp_path, credentials=creds)
    said = caught.value.advice()
    assert "https://git.invalid/org/repo.git" in said and "ghp_secret" not in said


def test_an_ssh_remote_this_host_cannot_fetch_has_no_route(tmp_path: Path) -> None:
    creds = tmp_path / "git-credentials"
    creds.write_text("https://u:tok@gitlab.com\n")
    creds.chmod(0o600)
    with pytest.raises(NoGitRoute, match="COLABQ_GIT_SSH_KEY_FILE"):
        check("git@github.com:org/repo.git", "0" * 40, tmp_path, credentials=creds)


def _key(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_deploy_key_file_that_would_fail_every_fetch_stops_the_worker(tmp_path: Path) -> None:
    good = tmp_path / "good"
    secret = canary_key(good, "good")
    check_ssh_key(good)
    canary_key(tmp_path / "enc", "passphrase", cipher="aes256-ctr")
    cases = {
        "encrypted": (tmp_path / "enc", "is encrypted or unreadable"),
        "pem encrypted": (
            _key(tmp_path / "pem", "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n"),
            "is encrypted",
        ),
        "a public key": (_key(tmp_path / "pub", "ssh-ed25519 AAAA me@host\n"), "holds no ssh"),
        "world-readable": (_key(tmp_path / "open", good.read_text(), 0o644), "has mode 0644"),
    }
    for why, (path, said) in cases.items():
        with pytest.raises(SecretFileError, match=said):
            check_ssh_key(path)
        problem = worker_host_problem(Settings(state_dir=tmp_path / "s", git_ssh_key_file=path))
        assert problem is not None and problem.endswith("(COLABQ_GIT_SSH_KEY_FILE)"), why
        assert secret not in problem, why


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")
def test_keys_ssh_keygen_writes_are_told_apart_by_their_passphrase(tmp_path: Path) -> None:
    for kind in ("ed25519", "rsa"):
        for passphrase, ok in (("", True), ("a passphrase", False)):
            key = tmp_path / f"{kind}-{ok}"
            subprocess.run(
                ["ssh-keygen", "-q", "-t", kind, "-N", passphrase, "-f", str(key)], check=True
            )
            if ok:
                check_ssh_key(key)
            else:
                with pytest.raises(SecretFileError, match="is encrypted"):
                    check_ssh_key(key)
