"""What `colabq usage` reports, computed from what it read: each Colab account's balance (the
last `colab usage` a host of the account recorded, with its age), its burn rate over the period
(the compute units of its jobs per hour of the period) and the compute units by job and by user.

A job's units and held time are its final report's (`compute_units`, `duration.held_s`: the
GPU's rate times the time the job held it, `worker.colab.rates.costs`), read as the report says
them; for a job still running, the figure `colabq status` shows so far (the same
`worker.colab.rates` functions on its record). The period holds the jobs submitted in it.
`--by` groups them (`group_usage`): the totals are sums of these values, rounded only when shown.
Pure: reading is the command's (`producer/commands/usage.py`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from producer.joblist import JobRow
from worker.accounts.balances import Balance
from worker.colab.rates import report_costs
from worker.states import TERMINAL

NO_ACCOUNT = "(none)"  # jobs recorded before accounts, or never claimed
BY = ("user", "account", "gpu", "day")  # `--by`: day is the local date the job was submitted
# Where a job's figures come from: its final report, the live figure of a job not ended (as
# `colabq status` shows it), or the record of an ended job without a report (never held a GPU).
REPORT, LIVE, RECORD = "report", "live", "record"


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
    source: str = RECORD
    created_at: float = 0.0

    def key(self, by: str) -> str:
        if by == "day":
            return datetime.fromtimestamp(self.created_at).date().isoformat()
        return str(getattr(self, by))


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


def job_use(row: JobRow, now: float, report: Mapping[str, Any] | None = None) -> JobUse | None:
    """A job's held time and compute units: its report's, else (running) so far (None for a
    damaged record)."""
    if row.state is None:
        return None
    costs = report_costs(report)
    if costs is not None:
        (held, units), source = costs, REPORT
    else:
        held, units = row.held_s(now) or 0.0, row.cu(now) or 0.0
        source = RECORD if row.state in TERMINAL else LIVE
    return JobUse(
        row.job_id, row.run, row.user or "?", row.fields.get("account") or NO_ACCOUNT, row.gpu,
        row.state_value, held, units, source, row.created_at or 0.0,
    )  # fmt: skip


@dataclass(frozen=True)
class GroupUse:
    """One row of `--by`: its jobs, how many are still running (figures so far), the GPU hours
    they held and their compute units (unrounded sums)."""

    key: str
    jobs: int
    live: int
    held_s: float
    units: float

    def to_json(self, by: str) -> dict[str, object]:
        hours = round(self.held_s / 3600, 2)
        units = round(self.units, 2)
        return {by: self.key, "jobs": self.jobs, "running": self.live, "gpu_hours": hours,
                "units": units}  # fmt: skip


def _group(key: str, jobs: Sequence[JobUse]) -> GroupUse:
    return GroupUse(
        key, len(jobs), sum(j.source == LIVE for j in jobs),
        math.fsum(j.held_s for j in jobs), math.fsum(j.units for j in jobs),
    )  # fmt: skip


def group_usage(jobs: Sequence[JobUse], by: str) -> tuple[tuple[GroupUse, ...], GroupUse]:
    """One row per user, account, GPU type or day (days in order, the others by units), and the
    total over all of them."""
    members: dict[str, list[JobUse]] = {}
    for j in jobs:
        members.setdefault(j.key(by), []).append(j)
    groups = [_group(k, js) for k, js in members.items()]
    order = (lambda g: (g.key,)) if by == "day" else (lambda g: (-g.units, g.key))
    return tuple(sorted(groups, key=order)), _group("total", jobs)


def build_usage(
    rows: Sequence[JobRow],
    balances: Mapping[str, Balance],
    *,
    since: float,
    now: float,
    reports: Mapping[str, Mapping[str, Any]] | None = None,
) -> UsageReport:
    got = reports or {}
    jobs = [u for r in rows if (u := job_use(r, now, got.get(r.job_id))) is not None]
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
