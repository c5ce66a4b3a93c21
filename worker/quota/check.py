"""The claim script's quota decision in Python (pure): whether a job of a scope would start now
or wait, and the reason it would wait with, word for word (`worker.quota.claim` is the one that
acts; a test holds the two to the same words). For `colabq quota`, and for a submit-time notice
("this will wait for quota X"): a quota never refuses a job, it only makes it wait.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from worker.flow.slots import BACKSTOP_S
from worker.quota.limits import LIMITS, Quota
from worker.quota.periods import Period


def fmt_units(x: float) -> str:
    """A quantity as the claim's reasons print it (Lua's `q_fmt`): 2 decimals from 1 up, else 3
    significant digits, without trailing zeros."""
    text = f"{x:.2f}" if x >= 1 else f"{x:.3g}"
    if "." in text and "e" not in text:
        text = text.rstrip("0").rstrip(".")
    return text


@dataclass(frozen=True)
class ScopeUse:
    """What a scope holds now: its running jobs, the units they have held so far, and the units
    of its jobs that ended in each period (`inf` for a damaged sum, as the claim reads it)."""

    running: int = 0
    held_units: float = 0.0
    spent: Mapping[str, float] = field(default_factory=dict)

    def used(self, period: str) -> float:
        return self.spent.get(period, 0.0) + self.held_units


@dataclass(frozen=True)
class Wait:
    reason: str
    retry_at: float  # the claim's next try: a backstop, or (a user's unit quota) the period's end


def find_wait(quota: Quota, use: ScopeUse, periods: Sequence[Period], now: float) -> Wait | None:
    """The wait a job of `quota`'s scope would get if claimed at `now`, or None (it starts)."""
    head = f"waiting: quota {quota.scope.label}"
    backstop = now + BACKSTOP_S
    for limit in LIMITS:
        if limit in quota.damaged:
            return Wait(
                f"{head} {limit} is damaged ({quota.damaged[limit]}): an operator sets it again "
                "(colabq quota set)",
                backstop,
            )  # fmt: skip
    if not quota.limits:
        return None
    gpus = quota.limits.get("gpus")
    if gpus is not None and use.running >= gpus:
        return Wait(f"{head} gpus {use.running} of {fmt_units(gpus)} running", backstop)
    for p in periods:
        lim = quota.limits.get(f"units_{p.name}")
        used = use.used(p.name)
        if lim is not None and used >= lim:
            retry = p.end_at if quota.scope.kind == "user" else min(p.end_at, backstop)
            text = f"{head} units-{p.name} {fmt_units(used)} of {fmt_units(lim)} used"
            return Wait(f"{text}, until {p.end_text}", retry)
    return None


def units_left(quota: Quota, use: ScopeUse) -> float | None:
    """What is left of the scope's tightest unit quota (None: no unit quota)."""
    left = [
        quota.limits[f"units_{p}"] - use.used(p)
        for p in ("day", "week", "month")
        if f"units_{p}" in quota.limits
    ]
    return max(min(left), 0.0) if left else None
