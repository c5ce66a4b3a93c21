"""Exit 126 and 127 in words: what the shells and launchers say, and the reason made of it."""

from __future__ import annotations

import pytest

from worker.exitwhy import JOB_SCRIPT, exit_reason, parse_said
from worker.session import plan

SCRIPT = "/tmp/colab-emu-vms/gpu-1-x/root/content/colab-user-job.sh"


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (f"bash: {SCRIPT}: Permission denied", (SCRIPT, "Permission denied")),
        ("/content/colab-user-job.sh: line 3: uv: command not found", ("uv", "command not found")),
        ("/bin/sh: 1: uv: not found", ("uv", "not found")),
        ("timeout: failed to run command \u2018uv\u2019: No such file or directory",
         ("uv", "No such file or directory")),
        ("timeout: failed to run command 'uv': Permission denied", ("uv", "Permission denied")),
        ("setpriv: failed to execute uv: No such file or directory",
         ("uv", "No such file or directory")),
        ("bash: ./x: cannot execute binary file: Exec format error",
         ("./x", "cannot execute binary file: Exec format error")),
        ("bash: ./x: cannot execute: required file not found",
         ("./x", "cannot execute: required file not found")),
        ("Permission denied", None),
        ("", None),
    ],
)  # fmt: skip
def test_what_could_not_be_run_and_why(line: str, said: tuple[str, str] | None) -> None:
    assert parse_said(line) == said


@pytest.mark.parametrize(
    ("code", "why", "reason"),
    [
        (126, f"nobody\tbash: {SCRIPT}: Permission denied",
         "the job script could not be run: Permission denied for the job's user nobody "
         "(exit 126); the job's user must reach the VM's /content"),
        (126, f"\tbash: {SCRIPT}: Permission denied",  # the job ran as the wrapper's user
         "the job script could not be run: Permission denied (exit 126)"),
        (127, "nobody\t/content/colab-user-job.sh: line 3: uv: command not found",
         "a command was not found: uv (exit 127); install it in the job's script or its "
         "project's environment, or call it by its full path"),
        (126, "nobody\tbash: /content/train.sh: Permission denied",
         "a command could not be run: /content/train.sh: Permission denied for the job's user "
         "nobody (exit 126); what the job runs must be readable and runnable by nobody"),
        (126, "nobody\tbash: ./x: cannot execute binary file: Exec format error",
         "a command could not be run: ./x: cannot execute binary file: Exec format error "
         "(exit 126)"),
        (127, "nobody\t", "a command of the job was not found (exit 127): see the job's log"),
        (126, "", "a command of the job could not be run (exit 126: found, but not "
                  "executable): see the job's log"),
        (126, "nobody\t", "a command of the job could not be run for the job's user nobody "
                          "(exit 126: found, but not executable): see the job's log"),
        (3, "nobody\tbash: x: command not found", "job exited 3"),  # only 126 and 127
        (1, "", "job exited 1"),
    ],
)  # fmt: skip
def test_the_reason_of_an_exit(code: int, why: str, reason: str) -> None:
    watch = {"exec_exit_why": why} if why else {}
    assert exit_reason(code, watch) == reason


def test_what_is_read_back_is_bounded_and_printable() -> None:
    """The sentinel comes back from Redis: no control characters, no odd user name, no essay."""
    why = "bad user!\tbash: /content/x\x1b[31m.sh: Permission denied" + "y" * 2000
    reason = exit_reason(126, {"exec_exit_why": why})
    assert reason.isprintable() and "bad user" not in reason and len(reason) < 700, reason


def test_the_job_script_is_the_one_the_plan_uploads() -> None:
    assert plan.SCRIPT == JOB_SCRIPT
