"""A `code: git` job whose remote is an ssh remote, fetched on the VM with the worker host's
deploy key (no ssh server needed: a fake `ssh` on the VM's PATH records how it was called and
serves the bare repository as a forge's sshd would): the key is a file in a folder only the
wrapper's user (root on Colab) reads, 0600, given to ssh alone with the known hosts colabq
ships, and gone once the fetch is over, whether it succeeded or not; its text is in no output
and no file left on the VM."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from tests.gitremote import FakeSsh, canary_key, fake_ssh, make_remote
from tests.vm.conftest import Vm

REMOTE = "git@git.test:org/project.git"
JOB = """\
echo "head: $(git rev-parse HEAD)"
ls -a "$(dirname "$(dirname "$(dirname "$PWD")")")/.colabq-secrets/j1" 2>/dev/null \\
  || echo "secrets: not the job's"
"""


def _setup(vm: Vm, tmp_path: Path, key_for: str) -> tuple[str, Path, str, FakeSsh]:
    """A forge (a bare repository served as git.test to the key `key_for` names), and the
    deploy key where the bundle puts it. Returns the commit, the key, its text, the fake ssh."""
    remote = make_remote(tmp_path / "forge" / "org")
    key = vm.content / ".colabq-git-ssh-key"
    needle = canary_key(key, "vm-deploy-key")
    served = key
    if key_for != "this key":
        served = tmp_path / "other-key"
        canary_key(served, "another")
    ssh = fake_ssh(tmp_path / "ssh", tmp_path / "forge", "git.test", served)
    vm.env["PATH"] = f"{ssh.bin_dir}:{vm.env['PATH']}"
    return remote.pushed, key, needle, ssh


def _args(commit: str, key: Path) -> list[str]:
    return ["--code-mode", "git", "--code-commit", commit, "--code-remote", REMOTE,
            "--git-ssh-key-file", str(key)]  # fmt: skip


def test_the_deploy_key_is_a_root_only_file_ssh_alone_reads_and_is_gone_after_the_fetch(
    vm: Vm, tmp_path: Path
) -> None:
    commit, key, needle, ssh = _setup(vm, tmp_path, "this key")
    digest = hashlib.sha256(key.read_bytes()).hexdigest()
    run = vm.run(JOB, *_args(commit, key))
    assert run.rc == 0, run.console
    assert f"head: {commit}" in run.job_log
    assert json.loads(run.sentinels["CODE"])["ok"] is True
    [call] = ssh.calls()  # the VM's fetch, the one ssh of the job
    secrets = vm.content / ".colabq-secrets" / "j1"
    moved = str(secrets / "git-ssh-key")
    assert call["host"] == "git.test" and call["command"] == "git-upload-pack 'org/project.git'"
    me = os.geteuid()  # the wrapper's user: root on Colab, the job's user is another
    assert call["uid"] == me
    assert call["key"] == {"path": moved, "mode": 0o600, "uid": me, "dir_mode": 0o700,
                           "dir_uid": me, "sha256": digest}  # fmt: skip
    argv = call["argv"]
    assert isinstance(argv, list) and argv[argv.index("-i") + 1] == moved
    assert set(call["options"]) >= {  # type: ignore[arg-type]
        "IdentitiesOnly=yes", "BatchMode=yes", "StrictHostKeyChecking=accept-new",
        f"UserKnownHostsFile={secrets / 'known_hosts'}",
    }  # fmt: skip
    assert call["known_hosts"] == ["bitbucket.org", "github.com", "gitlab.com"]
    if me == 0:  # the job runs as an unprivileged user: the folder is root's alone
        assert "secrets: not the job's" in run.job_log
    assert not key.exists() and list(secrets.iterdir()) == []  # moved at once, then deleted
    assert needle not in run.console and needle not in json.dumps(call)
    left = [p for p in vm.root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]
    assert left == []


def test_a_refused_deploy_key_fails_the_job_before_it_runs_and_is_deleted_all_the_same(
    vm: Vm, tmp_path: Path
) -> None:
    commit, key, needle, ssh = _setup(vm, tmp_path, "another key")
    run = vm.run("echo the-job-ran\n", *_args(commit, key))
    assert run.rc == 4, run.console
    assert "the-job-ran" not in run.console
    reason = json.loads(run.sentinels["CODE"])["reason"]
    assert reason.startswith(f"commit {commit} could not be fetched from {REMOTE}: "), reason
    assert len(ssh.calls()) == 1
    assert not key.exists() and list((vm.content / ".colabq-secrets" / "j1").iterdir()) == []
    assert needle not in run.console
