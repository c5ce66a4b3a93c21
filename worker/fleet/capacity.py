"""Waiting for capacity, as pure decisions: Colab saying "not now" (HTTP 412, an accelerator
refused, another GPU type served) is an everyday answer, so a job waits for its GPU with capped
exponential backoff until its capacity deadline (`spec.capacity_wait_s`, from its first
refusal), then ends FAILED_NO_GPU. `status` shows the wait: which types were refused, how often,
and when the next try is.
"""

from __future__ import annotations

from dataclasses import dataclass


def backoff_s(refusals: int, base_s: float, cap_s: float) -> float:
    """The wait after the `refusals`-th refusal in a row: base, 2 base, 4 base, ... capped."""
    return float(min(cap_s, base_s * 2 ** max(refusals - 1, 0)))


@dataclass(frozen=True)
class CapacityPlan:
    """What to do after a refusal: wait until `retry_at`, or give up (`retry_at` None)."""

    refusals: int
    since: float
    retry_at: float | None
    reason: str


def plan_wait(
    *,
    gpus: str,
    refusals_before: int,
    since: float | None,
    now: float,
    wait_s: float,
    base_s: float,
    cap_s: float,
) -> CapacityPlan:
    """After Colab refused `gpus` now: the next try, or FAILED_NO_GPU once the next try would
    fall past the deadline (`since` + `wait_s`; `since` is the first refusal)."""
    refusals = refusals_before + 1
    first = now if since is None else since
    deadline = first + wait_s
    retry_at = now + backoff_s(refusals, base_s, cap_s)
    if retry_at > deadline:
        waited = format_s(now - first)
        return CapacityPlan(
            refusals, first, None,
            f"no GPU: {gpus} refused {refusals}x over {waited} (capacity wait "
            f"{format_s(wait_s)} is over)",
        )  # fmt: skip
    return CapacityPlan(refusals, first, retry_at, f"waiting for a GPU: {gpus} refused {refusals}x")


def waiting_line(reason: str, retry_at: float | None, now: float) -> str:
    """The reason with the next try made relative (`status`): "…, next try in 2m"."""
    if retry_at is None:
        return reason
    left = retry_at - now
    return f"{reason}, next try {'in ' + format_s(left) if left > 0 else 'now'}"


def format_s(seconds: float) -> str:
    s = max(round(seconds), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s" if s % 60 else f"{s // 60}m"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"
