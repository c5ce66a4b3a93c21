"""The linear-scaling rule: the learning rate moves with the effective batch size.

Owns reading batch size, gradient accumulation and learning rate out of two flattened configs
and saying, when one moved without the other, what learning rate the rule would give
(Goyal et al., 2017: multiply the learning rate by the factor the effective batch grew by).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from producer.preflight.risky_keys import RiskySlot, slot_of
from producer.preflight.values import as_number, fmt_number

_TOLERANCE = 0.01  # relative: a 1% mismatch is rounding, not a broken rule


def _first(flat: Mapping[str, Any], slot: RiskySlot) -> tuple[str, float] | None:
    for key, value in flat.items():
        number = as_number(value) if slot_of(key) is slot else None
        if number is not None:
            return key, number
    return None


def _effective_batch(flat: Mapping[str, Any]) -> tuple[float, str] | None:
    batch = _first(flat, RiskySlot.BATCH_SIZE)
    if batch is None:
        return None
    accum = _first(flat, RiskySlot.GRAD_ACCUM)
    if accum is None or accum[1] == 1:
        return batch[1], fmt_number(batch[1])
    return batch[1] * accum[1], f"{fmt_number(batch[1])}x{fmt_number(accum[1])}"


def check_lr_scaling(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[str, str] | None:
    """(learning-rate key, message) when batch and lr moved apart; None when they agree."""
    old_bs, new_bs = _effective_batch(old), _effective_batch(new)
    old_lr, new_lr = _first(old, RiskySlot.LEARNING_RATE), _first(new, RiskySlot.LEARNING_RATE)
    lr_key = (new_lr or old_lr or ("lr", 0.0))[0]
    batch_moved = old_bs is not None and new_bs is not None and old_bs[0] != new_bs[0]
    lr_moved = (old_lr is None) != (new_lr is None) or (
        old_lr is not None and new_lr is not None and old_lr[1] != new_lr[1]
    )
    if batch_moved and old_bs is not None and new_bs is not None:
        factor = new_bs[0] / old_bs[0]
        batch_text = f"effective batch {old_bs[1]} → {new_bs[1]} (x{fmt_number(factor)})"
        if old_lr is None:
            return lr_key, (
                f"{batch_text} but no lr in the reference: the linear scaling rule scales the "
                f"default lr x{fmt_number(factor)}; set lr explicitly"
            )
        rule_lr = old_lr[1] * factor
        if not lr_moved:
            return lr_key, (
                f"{batch_text} but lr stayed {fmt_number(old_lr[1])}: the linear scaling rule "
                f"gives lr = {fmt_number(rule_lr)}"
            )
        if new_lr is None:
            return lr_key, (
                f"{batch_text} and lr {fmt_number(old_lr[1])} was removed (the framework "
                f"default now applies): the linear scaling rule gives lr = {fmt_number(rule_lr)}"
            )
        if not math.isclose(new_lr[1], rule_lr, rel_tol=_TOLERANCE):
            return lr_key, (
                f"{batch_text} but lr {fmt_number(old_lr[1])} → {fmt_number(new_lr[1])} "
                f"(x{fmt_number(new_lr[1] / old_lr[1])}): the linear scaling rule gives "
                f"lr = {fmt_number(rule_lr)}"
            )
        return None
    if lr_moved and old_lr is not None and new_lr is not None:
        same = f"the effective batch stayed {new_bs[1]}" if new_bs else "no batch size is set"
        return lr_key, (
            f"lr {fmt_number(old_lr[1])} → {fmt_number(new_lr[1])} while {same}: the linear "
            f"scaling rule keeps lr = {fmt_number(old_lr[1])} at this batch"
        )
    return None
