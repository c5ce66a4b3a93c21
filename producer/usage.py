"""What `colabq usage` reports, computed from what it read: each Colab account's balance (the
last `colab usage` a host of the account recorded, with its age), its burn rate over the period
(the compute units of its jobs per hour of the period) and the compute units by job and by user.

A job's units are what its report's `compute_units` says (`worker.colab.rates`: the GPU's rate
times the time the job held it), so far for a job still running; the period holds the jobs
submitted in it. Pure: reading is the command's (`producer/commands/usage.py`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from producer.joblist import JobRow
from worker.accounts.balances import Balance

NO_ACCOUNT = "(none)"  # jobs recorded before accounts, or never claimed


@dataclass(frozen=True)
class JobUse:
    job_id: str
    run: str
    user: str
    account: str
    gpu: str
    state: str
    held_s: float
    units: float


@dataclass
class Total:
    units: float = 0.0
    jobs: int = 0
    accounts: set[str] = field(default_factory=set)

    def add(self, job: JobUse) -> None:
        self.units += job.units
        self.jobs += 1
        self.accounts.add(job.account)


@dataclass(frozen=True)
class AccountUse:
    account: str
    balance: Balance | None
    units: float
    jobs: int
    burn_per_hour: float


@dataclass(frozen=True)
class UsageReport:
    since: float
    now: float
    accounts: tuple[AccountUse, ...]
    users: tuple[tuple[str, Total], ...]
    jobs: tuple[JobUse, ...]

    @property
    def period_s(self) -> float:
        return max(self.now - self.since, 1.0)

    def to_json(self) -> dict[str, object]:
        def account(a: AccountUse) -> dict[str, object]:
            b = a.balance
            return {
                "account": a.account, "units": round(a.units, 4), "jobs": a.jobs,
                "burn_per_hour": round(a.burn_per_hour, 4),
                "balance_units": b.balance_units if b else None,
                "balance_at": b.at if b else None,
                "balance_age_s": round(self.now - b.at, 1) if b else None,
                "balance_by": b.by if b else None,
            }  # fmt: skip

        return {
            "since": self.since, "now": self.now, "period_s": round(self.period_s, 1),
            "accounts": [account(a) for a in self.accounts],
            "users": [{"user": u, "units": round(t.units, 4), "jobs": t.jobs,
                       "accounts": sorted(t.accounts)} for u, t in self.users],
            "jobs": [{**j.__dict__, "held_s": round(j.held_s, 1), "units": round(j.units, 4)}
                     for j in self.jobs],
        }  # fmt: skip


def job_use(row: JobRow, now: float) -> JobUse | None:
    """A job's compute units (None for a damaged record)."""
    if row.state is None:
        return None
    held = row.held_s(now) or 0.0
    return JobUse(
        row.job_id, row.run, row.user or "?", row.fields.get("account") or NO_ACCOUNT, row.gpu,
        row.state_value, held, row.cu(now) or 0.0,
    )  # fmt: skip


def build_usage(
    rows: Sequence[JobRow], balances: Mapping[str, Balance], *, since: float, now: float
) -> UsageReport:
    jobs = [u for r in rows if (u := job_use(r, now)) is not None]
    hours = max(now - since, 1.0) / 3600
    per_account: dict[str, Total] = {name: Total() for name in balances}
    per_user: dict[str, Total] = {}
    for j in jobs:
        per_account.setdefault(j.account, Total()).add(j)
        per_user.setdefault(j.user, Total()).add(j)
    accounts = tuple(
        AccountUse(name, balances.get(name), t.units, t.jobs, t.units / hours)
        for name, t in sorted(per_account.items(), key=lambda kv: (-kv[1].units, kv[0]))
    )
    users = tuple(sorted(per_user.items(), key=lambda kv: (-kv[1].units, kv[0])))
    return UsageReport(since, now, accounts, users, tuple(sorted(jobs, key=lambda j: -j.units)))
