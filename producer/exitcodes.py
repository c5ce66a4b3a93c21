"""The exit codes of `colabq`, in one table (the README prints it; a test checks they agree).

A command that fails exits with the code of its error; `colabq status JOB`, `colabq logs -f` and
`colabq adopt` exit with the job's outcome, so a script can wait on a job and branch on how it
ended. `colabq doctor` exits 1 when a check fails, 2 when the `colab` CLI is a release colabq
does not drive.
"""

from __future__ import annotations

from worker.errors import BrokerUnavailable, ColabqError, GateSilent, JobNotFound, UserInputError
from worker.states import JobState

OK = 0
FAILED = 1  # a known error; or the job FAILED (its script exited non-zero, persistence failed)
BAD_INPUT = 2  # nothing was changed
REDIS_UNREACHABLE = 3
NO_SUCH_JOB = 4  # or an ambiguous id prefix (the candidates are listed)
TIMED_OUT = 5
CANCELLED = 6
NO_CAPACITY = 7  # FAILED_NO_GPU or FAILED_BUDGET: the account, not the job
LOST = 8  # FAILED_LOST or VM_LOST: the VM or every owner was lost
NOT_OVER = 9  # `status JOB`: the job is still queued or running
KEPT = 10  # no gate answered: the request waits in its stream until one runs (`worker.gate`)

# (code, meaning) in the order the README's table lists them.
TABLE: tuple[tuple[int, str], ...] = (
    (OK, "success; the job SUCCEEDED"),
    (FAILED, "a known error; the job FAILED"),
    (BAD_INPUT, "bad input: nothing was enqueued or changed"),
    (REDIS_UNREACHABLE, "Redis unreachable"),
    (NO_SUCH_JOB, "no such job, or an ambiguous id prefix"),
    (TIMED_OUT, "the job TIMED_OUT: its time limit or the wall cap ran out"),
    (CANCELLED, "the job was CANCELLED"),
    (NO_CAPACITY, "FAILED_NO_GPU or FAILED_BUDGET: no GPU or no compute units"),
    (LOST, "FAILED_LOST or VM_LOST: the VM or its owners were lost"),
    (NOT_OVER, "`status JOB`: the job is not over yet"),
    (KEPT, "no gate answered in time: the request is kept and handled when one runs"),
)

_BY_STATE = {
    JobState.SUCCEEDED: OK,
    JobState.FAILED: FAILED,
    JobState.TIMED_OUT: TIMED_OUT,
    JobState.CANCELLED: CANCELLED,
    JobState.FAILED_NO_GPU: NO_CAPACITY,
    JobState.FAILED_BUDGET: NO_CAPACITY,
    JobState.FAILED_LOST: LOST,
    JobState.VM_LOST: LOST,
}


def for_state(state: JobState) -> int:
    """The exit code a job in `state` gives `status JOB`, `logs -f` and `adopt`."""
    return _BY_STATE.get(state, NOT_OVER)


def for_error(exc: ColabqError) -> int:
    if isinstance(exc, BrokerUnavailable):
        return REDIS_UNREACHABLE
    if isinstance(exc, JobNotFound):
        return NO_SUCH_JOB
    if isinstance(exc, UserInputError):
        return BAD_INPUT
    if isinstance(exc, GateSilent):
        return KEPT
    return FAILED
