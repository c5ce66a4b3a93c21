"""The errors `colabq.Client` raises: colabq's own (`worker.errors`, one root, `ColabqError`;
each also subclasses the builtin that matches it), the pre-flight's refusal, and a wait that
timed out. `str(error)` is the one line the CLI prints; `error.advice()` adds what to do next.
"""

from __future__ import annotations

from producer.commands.status import DamagedJob
from producer.preflight.gate import PreflightFailed
from worker.errors import (
    AmbiguousJob,
    BrokerUnavailable,
    ColabqError,
    ConfigError,
    JobNotFound,
    LedgerError,
    RunNameInUse,
    SpecError,
    StoreError,
    UserInputError,
)
from worker.states import JobState


class WaitTimeout(ColabqError, TimeoutError):
    """`Client.wait` gave up before the job ended; the job goes on."""

    def __init__(self, job_id: str, state: JobState, timeout_s: float) -> None:
        super().__init__(f"Job {job_id} is still {state.name} after {timeout_s:g} s.")
        self.job_id, self.state, self.timeout_s = job_id, state, timeout_s

    hint = "Wait again, or cancel it."


__all__ = [
    "AmbiguousJob",
    "BrokerUnavailable",
    "ColabqError",
    "ConfigError",
    "DamagedJob",
    "JobNotFound",
    "LedgerError",
    "PreflightFailed",
    "RunNameInUse",
    "SpecError",
    "StoreError",
    "UserInputError",
    "WaitTimeout",
]
