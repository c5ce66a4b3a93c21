"""colabq from Python: `from colabq import Client`.

    from colabq import Client

    client = Client()  # the settings `colabq` reads: COLABQ_*, ~/.config/colabq/settings.env
    sub = client.submit("train.sh", name="mnist-mlp-bs64", gpu="T4", wall="2h",
                        hub_repo="alice/mnist-runs", sync=["ckpt"])
    job = client.wait(sub.job_id)
    print(job.state, job.reason)

`Client` (`colabq/client.py`) runs what the commands run; its results are frozen records
(`colabq/results.py`); its errors colabq's own (`colabq/errors.py`), re-exported here.
"""

from __future__ import annotations

from colabq.client import Client
from colabq.errors import (
    AmbiguousJob,
    BrokerUnavailable,
    ColabqError,
    ConfigError,
    DamagedJob,
    JobNotFound,
    LedgerError,
    PreflightFailed,
    RunNameInUse,
    SpecError,
    StoreError,
    UserInputError,
    WaitTimeout,
)
from colabq.results import Cancelled, JobInfo, RunProgress, Submission, SubmittedJob
from colabq.submitting import SubmitOptions
from worker.states import TERMINAL, JobState

__all__ = [
    "TERMINAL",
    "AmbiguousJob",
    "BrokerUnavailable",
    "Cancelled",
    "Client",
    "ColabqError",
    "ConfigError",
    "DamagedJob",
    "JobInfo",
    "JobNotFound",
    "JobState",
    "LedgerError",
    "PreflightFailed",
    "RunNameInUse",
    "RunProgress",
    "SpecError",
    "StoreError",
    "Submission",
    "SubmitOptions",
    "SubmittedJob",
    "UserInputError",
    "WaitTimeout",
]
