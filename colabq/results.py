"""What `colabq.Client` returns: frozen records of a submission, a job and a cancel.

Each is built from what the CLI prints with `--json` (`producer.submit_report`,
`producer.render.job_json`, `producer.commands.cancel.cancel_one`): the typed fields a script
needs, and `data`, the whole object the command prints, for everything else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from worker.states import TERMINAL, JobState

if TYPE_CHECKING:
    from producer.preflight.report import Report
    from worker.progress.record import Limit, Reading
    from worker.records.record import HistoryEntry, JobRecord


@dataclass(frozen=True)
class SubmittedJob:
    """One job of a submission (a sweep has several), as `colabq submit --json` lists it."""

    run_name: str
    gpu: str
    queue: str
    swept: Mapping[str, str]  # the sweep's values that made this job ({} without a sweep)
    time_limit_s: float
    wall_cap_s: float
    # None for a dry run (nothing was recorded), else the job's id and whether this submit
    # created it (False: the same idempotency key names a live or succeeded job, returned).
    job_id: str | None = None
    created: bool = False
    state: JobState | None = None
    data: Mapping[str, Any] | None = None  # the job's object in `colabq submit --json`


@dataclass(frozen=True)
class Submission:
    """What `Client.submit` did: the jobs (in the sweep's order), what the pre-flight found,
    the warnings `colabq submit` prints, and the plan of what each VM fetches and runs."""

    jobs: tuple[SubmittedJob, ...]
    dry_run: bool
    warnings: tuple[str, ...] = ()
    plan: tuple[str, ...] = ()  # what the VM fetches and runs (with code), one line each
    preflight: tuple[Report, ...] = ()  # one report per distinct pre-flight run
    output_repo: str | None = None  # what the check of the first destination saw
    sweep: str | None = None  # a sweep's id (`colabq status --sweep ID`); None for one job

    @property
    def job_ids(self) -> tuple[str, ...]:
        """Every job's id, in the sweep's order (none for a dry run)."""
        return tuple(j.job_id for j in self.jobs if j.job_id is not None)

    @property
    def job_id(self) -> str:
        """The id of the one job submitted; ValueError for a sweep or a dry run."""
        if self.dry_run or len(self.jobs) != 1 or self.jobs[0].job_id is None:
            raise ValueError(
                f"a {'dry run' if self.dry_run else f'{len(self.jobs)}-job submission'} has "
                "no single job id: read .job_ids"
            )
        return self.jobs[0].job_id


def submitted(row: Mapping[str, Any], gpu: str) -> SubmittedJob:
    """A job from its row in `colabq submit --json` (or a dry run's plan row)."""
    return SubmittedJob(
        run_name=str(row["run"]),
        gpu=gpu,
        queue=str(row["queue"]),
        swept=dict(row["swept"]),
        time_limit_s=float(row["time_limit_s"]),
        wall_cap_s=float(row["wall_cap_s"]),
        job_id=row.get("job_id"),
        created=bool(row.get("created", False)),
        state=JobState(row["state"]) if row.get("state") else None,
        data=dict(row),
    )


@dataclass(frozen=True)
class RunProgress:
    """How far a run got, as its console said (`status JOB --json`'s `progress`): done of
    total in `unit` ("epoch", "step", or a progress bar's own), the rate measured over the last
    few minutes, when it ends at that rate (epoch s), and how long past its own time limit
    (negative: before it)."""

    fraction: float | None  # None: the run's length is not known
    done: float
    total: float | None
    unit: str
    rate_per_s: float | None
    eta_at: float | None
    seen_at: float  # when the console last said it (epoch s)
    time_limit_at: float | None  # when the job's own time limit stops it (epoch s)
    over_limit_s: float | None
    projected_overrun: bool  # believed to end past its time limit (the warning's test)


def run_progress(data: Mapping[str, Any] | None) -> RunProgress | None:
    if not data:
        return None
    return RunProgress(
        fraction=data["fraction"], done=float(data["done"]), total=data["total"],
        unit=str(data["unit"]), rate_per_s=data["rate_per_s"], eta_at=data["eta_at"],
        seen_at=float(data["seen_at"]), time_limit_at=data["time_limit_at"],
        over_limit_s=data["over_limit_s"], projected_overrun=bool(data["projected_overrun"]),
    )  # fmt: skip


@dataclass(frozen=True)
class JobInfo:
    """One job as `colabq status JOB --json` shows it: its state and why, its GPU and run,
    its times, and its final report once it is over."""

    job_id: str
    run_name: str
    state: JobState
    reason: str
    gpu: str  # the type it runs on (a fallback type when Colab could not serve the first)
    user: str | None  # who submitted it
    worker: str | None
    account: str | None  # the Colab account of the worker that ran it
    submitted_at: float  # epoch s
    updated_at: float  # epoch s
    elapsed_s: float  # submission to now, or to its end
    held_s: float  # the time a GPU was held (billed)
    cu: float | None  # compute units so far
    exit_code: int | None
    time_limit_s: float
    wall_cap_s: float
    history: tuple[HistoryEntry, ...]
    report: Mapping[str, Any] | None  # the final report, once over
    data: Mapping[str, Any]  # everything `colabq status JOB --json` prints
    progress: RunProgress | None = None  # how far the run got, if its console said

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    @property
    def succeeded(self) -> bool:
        return self.state is JobState.SUCCEEDED


def job_info(
    rec: JobRecord,
    history: list[HistoryEntry],
    now: float | None = None,
    progress: tuple[Reading | None, Limit | None] = (None, None),
) -> JobInfo:
    from producer.render import job_json

    data = job_json(rec, history, now, progress)
    return JobInfo(
        job_id=rec.job_id,
        run_name=rec.spec.run_name,
        state=rec.state,
        reason=str(data["reason"]),
        gpu=str(data["gpu"]),
        user=data["user"],
        worker=data["worker"],
        account=rec.get("account"),
        submitted_at=rec.created_at,
        updated_at=rec.updated_at,
        elapsed_s=float(data["elapsed_s"]),
        held_s=float(data["held_s"]),
        cu=data["cu"],
        exit_code=data["exit_code"],
        time_limit_s=rec.spec.ttl_s,
        wall_cap_s=rec.spec.wall_cap_s,
        history=tuple(history),
        report=data["report"],
        data=data,
        progress=run_progress(data["progress"]),
    )


CancelOutcome = Literal["cancelled", "requested", "already_over"]


@dataclass(frozen=True)
class Cancelled:
    """What `Client.cancel` did, as `colabq cancel --json` says: `cancelled` (it ended now: no
    live runner held it and it held no session), `requested` (its runner, or the adopter of a
    dead one, stops its session and ends it) or `already_over`; `message` is the CLI's line."""

    job_id: str
    state_before: JobState
    result: CancelOutcome
    message: str
