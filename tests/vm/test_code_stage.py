"""The job's repository on the VM, exactly: the wrapper fetches (git) or unpacks (snapshot) the
commit into repo/, runs `uv sync --frozen` and the job under `uv run --no-sync` in the job's
folder, where its sync paths are too; a code or environment that is not ready is the job's own
failure (wrapper exit 4 or 5, one reason, the job never runs); the git credential is a file
only git reads, gone once the fetch is over."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from ops.uvproject import UvProject, build_uv_project, commit_all, snapshot_archive
from tests.vm.conftest import Vm, code_args

# What a job prints about where it runs.
WHERE = """\
echo "presets: ${UV_SYSTEM_PYTHON:-unset} ${PYTHONPATH:-unset} ${MPLBACKEND:-unset}"
echo "cwd: $PWD"
echo "python: $(python -c 'import sys; print(sys.prefix)')"
python train.py
"""
RAN = "echo the-job-ran\n"


def test_a_git_job_runs_exactly_its_commit_in_the_projects_environment(
    vm: Vm, project: UvProject
) -> None:
    run = vm.run(
        'echo "head: $(git rev-parse HEAD)"\n' + WHERE, *code_args(project), "--sync", "out"
    )
    assert run.rc == 0, run.console
    repo = run.work / "repo"
    assert f"head: {project.commit}" in run.job_log
    assert f"cwd: {repo}" in run.job_log
    assert f"python: {repo / '.venv'}" in run.job_log  # uv run --no-sync: the project's .venv
    assert "presets: unset unset unset" in run.job_log
    code = json.loads(run.sentinels["CODE"])
    assert code["ok"] and code["commit"] == project.commit and code["mode"] == "git"
    env = json.loads(run.sentinels["ENVIRONMENT"])
    assert env["ok"] and env["driver_cuda"] == "12.4" and env["torch_cuda"] == "12.4"
    assert env["venv"] == str(repo / ".venv") and env["breakages"] == []
    # The sync path resolves in the job's folder: its result reached the store.
    assert (vm.store / "p" / "out" / "result.txt").read_text() == "trained\n"
    assert run.sentinels["EXIT"] == "0"


def test_a_snapshot_job_unpacks_its_commit_and_starts_in_its_subdir(vm: Vm, tmp_path: Path) -> None:
    project = build_uv_project(
        tmp_path / "src" / "mono", files={"train/run.sh": "echo in-subdir\n"}
    )
    archive = snapshot_archive(
        project.root, project.commit, vm.store / "code" / f"{project.commit}.tar.gz"
    )
    run = vm.run(
        'echo "recorded: $(cat ../.colabq-commit)"\necho "cwd: $PWD"\nbash run.sh\n',
        *code_args(project, mode="snapshot", snapshot=archive.as_uri(), subdir="train"),
    )
    assert run.rc == 0, run.console
    assert f"recorded: {project.commit}" in run.job_log
    assert f"cwd: {run.work / 'repo' / 'train'}" in run.job_log and "in-subdir" in run.job_log
    assert json.loads(run.sentinels["CODE"])["ok"]
    assert list((run.work / "code-archive").glob("*")) == []  # the archive is gone once unpacked


def _unpushed(project: UvProject) -> UvProject:
    (project.root / "train.py").write_text("print('never pushed')\n")
    return commit_all(project, "not pushed")


def _lock_without_its_wheel(project: UvProject) -> UvProject:
    (project.root / "wheels" / "torch-2.5.0+cu124-py3-none-any.whl").unlink()
    return commit_all(project, "a wheel the lock names is gone")


@pytest.mark.parametrize(
    ("case", "rc", "reason"),
    [
        ("not fetchable", 4, "could not be fetched from file://"),
        ("snapshot missing", 4, "the snapshot could not be downloaded: file:///"),
        ("no such subdir", 4, "the folder 'nowhere' is not in commit"),
        ("uv sync fails", 5, "uv sync --frozen failed (exit 2): error:"),
        ("stage broken", 2, "the code stage failed (exit 2): see the job's log"),
    ],
)
def test_code_or_environment_not_ready_is_the_jobs_failure_and_it_never_runs(
    vm: Vm, project: UvProject, case: str, rc: int, reason: str
) -> None:
    if case == "not fetchable":
        args = code_args(project, commit=_unpushed(project).commit)
    elif case == "snapshot missing":
        missing = (vm.store / "code" / f"{project.commit}.tar.gz").as_uri()
        args = code_args(project, mode="snapshot", snapshot=missing)
    elif case == "no such subdir":
        args = code_args(project, subdir="nowhere")
    elif case == "stage broken":
        (vm.content / "colabq_code.py").unlink()
        args = code_args(project)
    else:
        broken = _lock_without_its_wheel(project)
        snapshot = snapshot_archive(broken.root, broken.commit, vm.root / "s.tar.gz")
        args = code_args(broken, mode="snapshot", snapshot=snapshot.as_uri())
    run = vm.run(RAN, *args)
    assert run.rc == rc, run.console
    assert "the-job-ran" not in run.console
    failed = json.loads(run.sentinels["ENVIRONMENT" if rc == 5 else "CODE"])
    assert not failed["ok"] and reason in failed["reason"], failed
    assert "\n" not in failed["reason"]
    assert run.sentinels["DONE"] == str(rc) and "EXIT" not in run.sentinels
    # The log says why, and reached the store for the user to read.
    assert failed["reason"] in (vm.store / "p" / "logs" / "j1" / "job.log").read_text()


def test_the_git_credential_is_a_file_only_git_reads_and_is_gone_after_the_fetch(
    vm: Vm, project: UvProject
) -> None:
    secret = "ghp_vm_canary_0123456789"
    creds = vm.content / ".colabq-git-credentials"
    creds.write_text(f"https://colabq:{secret}@git.invalid\n")
    creds.chmod(0o600)
    run = vm.run(
        'echo "head: $(git rev-parse HEAD)"\nenv | grep -c ghp_vm_canary || true\n'
        'ls -a "$(dirname "$(dirname "$(dirname "$PWD")")")/.colabq-secrets/j1" 2>/dev/null'
        ' || echo "secrets: not the job\'s"\n',
        *code_args(project, uv=False), "--git-credentials-file", str(creds),
    )  # fmt: skip
    assert run.rc == 0, run.console
    assert f"head: {project.commit}" in run.job_log
    if os.geteuid() == 0:  # the job runs as an unprivileged user: the folder is root's alone
        assert "secrets: not the job's" in run.job_log
    assert not creds.exists()  # moved out of /content at once ...
    secrets_dir = vm.content / ".colabq-secrets" / "j1"
    assert stat.S_IMODE(secrets_dir.stat().st_mode) == 0o700
    assert list(secrets_dir.iterdir()) == []  # ... and deleted once the fetch was over
    assert secret not in run.console
    found = [p for p in vm.root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert found == []
