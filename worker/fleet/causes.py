"""Every failure has exactly one cause, decided where it is seen, and the cause decides what
happens (architecture.md, "The fleet survives its members"):

| cause    | the job                                   | the worker                 |
| job      | ends (FAILED, TIMED_OUT, ...)             | goes on                    |
| host     | back to the queue untouched               | drains, probes, resumes    |
| capacity | waits with capped backoff, tries fallback | goes on with other work    |

The VM's own failures (preempted, reclaimed) are the runner's VM_LOST. A step of the runner that
meets a host or capacity failure before any GPU is held raises `PutBack`; `cause_of` classes an
error raised by a check that does not depend on the job.
"""

from __future__ import annotations

from enum import StrEnum

from worker.errors import (
    AcceleratorRejected,
    AllocationRefused,
    BrokerUnavailable,
    ColabError,
    ColabqError,
    HubAuthError,
    HubUnavailable,
    SecretFileError,
)


class Cause(StrEnum):
    JOB = "job"
    HOST = "host"
    CAPACITY = "capacity"


class GpuMismatch(ColabError):
    """The VM's GPU is not the type that was allocated (Colab served another one)."""

    def __init__(self, wanted: str, got: str) -> None:
        super().__init__(f"asked for {wanted}, the VM has {got or 'no GPU'}")
        self.wanted, self.got = wanted, got


class PutBack(Exception):
    """Internal: this owner gives the job back to the queue, untouched (no GPU held)."""

    def __init__(
        self, cause: Cause, reason: str, *, gpus_tried: tuple[str, ...] = (), released: bool = False
    ) -> None:
        super().__init__(reason)
        self.cause, self.reason, self.gpus_tried = cause, reason, gpus_tried
        # The session it held was released and verified gone first (a GPU of the wrong type).
        self.released = released


CAPACITY_ERRORS: tuple[type[ColabqError], ...] = (
    AllocationRefused,
    AcceleratorRejected,
    GpuMismatch,
)


def cause_of(exc: BaseException) -> Cause:
    """The cause of an error met by a step that does not depend on the job (a pre-allocation
    check of the host, `colab new`): capacity for Colab's refusals, host for everything the
    host owns (its login, its CLI, its files, its Redis and Hub connections), job otherwise.
    colabq's own errors are classed by type first (several subclass OSError builtins)."""
    if isinstance(exc, CAPACITY_ERRORS):
        return Cause.CAPACITY
    if isinstance(exc, ColabqError):
        if isinstance(exc, ColabError | SecretFileError | BrokerUnavailable | HubUnavailable):
            return Cause.HOST
        if isinstance(exc, HubAuthError) and exc.status in (None, 401):
            return Cause.HOST  # this host's token is missing or refused; 403 is the repo's
        return Cause.JOB
    return Cause.HOST if isinstance(exc, OSError) else Cause.JOB
