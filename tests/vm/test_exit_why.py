"""A job that exits 126 or 127: the wrapper on the VM says what could not be run and as which
user (its EXIT_WHY sentinel), from what the job's shell said, and the owner's reason words it
(worker/exitwhy.py). Run as root, the job runs as an unprivileged user, as on Colab."""

from __future__ import annotations

import os

import pytest

from tests.vm.conftest import Vm
from worker.exitwhy import exit_reason

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the job's user differs from the wrapper's only when it runs as root"
)


def reason(vm: Vm, script: str) -> tuple[int, str]:
    run = vm.run(script)
    assert "EXIT_WHY" in run.sentinels, run.console
    return run.rc, exit_reason(run.rc, {"exec_exit_why": run.sentinels["EXIT_WHY"]})


def test_a_command_not_found_is_named(vm: Vm) -> None:
    rc, why = reason(vm, "echo started\nset -e\nfrobnicate-the-weights --all\necho never\n")
    assert rc == 127
    assert why.startswith("a command was not found: frobnicate-the-weights (exit 127); "), why


def test_a_file_the_job_cannot_run_is_named_with_the_jobs_user(vm: Vm) -> None:
    (vm.content / "train.sh").write_text("echo hi\n")  # no x bit
    rc, why = reason(vm, f"set -e\n{vm.content}/train.sh\n")
    assert rc == 126
    user = "colabq-job" if "colabq-job" in why else "nobody"  # whichever this host has
    assert why == (
        f"a command could not be run: {vm.content}/train.sh: Permission denied for the job's "
        f"user {user} (exit 126); what the job runs must be readable and runnable by {user}"
    ), why


def test_a_job_script_out_of_the_jobs_users_reach_is_named(vm: Vm) -> None:
    """The issue's case: the VM's folder in one only root enters, the job exits 126 with a
    bare `bash: ...: Permission denied` in its log; the reason says it was the job script."""
    vm.root.chmod(0o700)
    rc, why = reason(vm, "echo never\n")
    assert rc == 126
    assert why.startswith("the job script could not be run: Permission denied for the job's "
                          "user "), why  # fmt: skip
    assert why.endswith("(exit 126); the job's user must reach the VM's /content"), why


def test_an_ordinary_failure_has_no_exit_why(vm: Vm) -> None:
    run = vm.run("echo 'ls: cannot access x: No such file or directory'\nexit 3\n")
    assert run.rc == 3 and "EXIT_WHY" not in run.sentinels, run.console
    assert exit_reason(3, {}) == "job exited 3"
