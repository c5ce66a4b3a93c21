"""Job states as data: the enum, the allowed transitions, and what each state means to a user.

The ledger's `transition()` is the only writer of a job's state and consults `ALLOWED` here; the
README's state diagram is checked against this table by a test.
"""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    QUEUED = "queued"
    ALLOCATING = "allocating"
    STARTING = "starting"
    RUNNING = "running"
    PERSISTING = "persisting"
    RETAINED = "retained"
    RELEASING = "releasing"
    RESTARTING = "restarting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    FAILED_NO_GPU = "failed_no_gpu"
    FAILED_BUDGET = "failed_budget"
    FAILED_LOST = "failed_lost"
    VM_LOST = "vm_lost"
    CANCELLED = "cancelled"


S = JobState

TERMINAL: frozenset[JobState] = frozenset(
    {
        S.SUCCEEDED,
        S.FAILED,
        S.TIMED_OUT,
        S.FAILED_NO_GPU,
        S.FAILED_BUDGET,
        S.FAILED_LOST,
        S.VM_LOST,
        S.CANCELLED,
    }
)

# Where a session may exist: leaving one of these for a terminal state must go via RELEASING.
HOLDS_SESSION: frozenset[JobState] = frozenset(
    {S.STARTING, S.RUNNING, S.PERSISTING, S.RETAINED, S.RELEASING}
)

# The edges. A failure after allocation goes through RELEASING, which ends in the cause.
ALLOWED: dict[JobState, frozenset[JobState]] = {
    S.QUEUED: frozenset({S.ALLOCATING, S.CANCELLED, S.FAILED, S.FAILED_LOST}),
    # Back to QUEUED: given back untouched before any GPU was held (a host failure, a capacity
    # refusal; `worker.fleet.putback`, which checks this edge and the owner in one script).
    S.ALLOCATING: frozenset(
        {
            S.QUEUED,
            S.STARTING,
            S.RELEASING,
            S.FAILED,
            S.FAILED_NO_GPU,
            S.FAILED_BUDGET,
            S.CANCELLED,
            S.FAILED_LOST,
        }
    ),
    S.STARTING: frozenset({S.RUNNING, S.RELEASING, S.FAILED_LOST}),
    S.RUNNING: frozenset({S.PERSISTING, S.RELEASING, S.RETAINED, S.FAILED_LOST}),
    S.PERSISTING: frozenset({S.RELEASING, S.RETAINED, S.FAILED_LOST}),
    S.RETAINED: frozenset({S.RELEASING, S.FAILED_LOST}),
    S.RELEASING: frozenset(
        {
            S.SUCCEEDED,
            S.FAILED,
            S.TIMED_OUT,
            S.CANCELLED,
            S.FAILED_NO_GPU,
            S.FAILED_LOST,
            S.VM_LOST,
            S.RESTARTING,
            # A VM whose GPU was not the type allocated, released: the job waits for its GPU.
            S.QUEUED,
        }
    ),
    # A new segment of a job whose VM was lost: a new session, resumed from the last checkpoint.
    S.RESTARTING: frozenset({S.ALLOCATING, S.CANCELLED, S.TIMED_OUT, S.FAILED, S.FAILED_LOST}),
    **{t: frozenset() for t in TERMINAL},
}


def can_transition(src: JobState, dst: JobState) -> bool:
    return dst in ALLOWED[src]


DESCRIPTIONS: dict[JobState, str] = {
    S.QUEUED: "waiting for a worker with a free slot (or for a GPU Colab could not give yet)",
    S.ALLOCATING: "pre-allocation checks, then `colab new`",
    S.STARTING: "uploading the wrapper and the job script",
    S.RUNNING: "the job runs on the VM",
    S.PERSISTING: "final upload and verification of artifacts",
    S.RETAINED: "VM kept: it holds the only copy of results, being recovered",
    S.RELEASING: "stopping the session and verifying it is gone",
    S.RESTARTING: "the VM was lost; a new segment resumes from the last synced checkpoint",
    S.SUCCEEDED: "exit 0, artifacts verified, session released",
    S.FAILED: "the job exited non-zero or a check failed",
    S.TIMED_OUT: "stopped at the wall cap",
    S.FAILED_NO_GPU: "Colab refused the allocation",
    S.FAILED_BUDGET: "compute-unit balance below the job's budget",
    S.FAILED_LOST: "the owner died and the job could not be recovered",
    S.VM_LOST: "the VM went away under the job (preempted, reclaimed or stopped elsewhere)",
    S.CANCELLED: "cancelled by a user",
}
