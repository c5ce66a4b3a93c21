"""The scaling rule: the learning rate moves with the effective batch size.

Owns reading the effective batch (per-device batch x gradient accumulation x devices, or a
global batch as stated) and the learning rate out of a flattened config by the frameworks'
names (`batch_names.py`), and saying, when one moved without the other, what learning rate the
linear rule (Goyal et al., 2017: multiply it by the factor the batch grew by) or the
square-root rule (common with Adam) would give. Either rule applied is accepted.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from producer.preflight.batch_names import (
    ACCUM_NAMES,
    AUTO_SCALES,
    BATCH_NAMES,
    DEVICE_NAMES,
    LR_NAMES,
    NODE_NAMES,
    NOT_TRAINING,
    WORLD_NAMES,
    AutoWhen,
    BatchName,
    Scope,
    Unit,
    normal,
    spellings,
)
from producer.preflight.values import as_number, first_number, fmt_number

_TOLERANCE = 0.01  # relative: a 1% mismatch is rounding, not a broken rule
_SCOPE_RANK = {Scope.GLOBAL: 0, Scope.PER_DEVICE: 1, Scope.PLAIN: 2}


@dataclass(frozen=True)
class EffectiveBatch:
    """The batch of one optimizer step, and the keys it was computed from, in words."""

    size: float
    unit: Unit
    factors: tuple[str, ...]  # "per_device_train_batch_size 16 (HF Transformers, per device)"
    caveats: tuple[str, ...] = ()  # device counts that could not be multiplied in

    @property
    def how(self) -> str:
        text = " x ".join(self.factors)
        if len(self.factors) > 1:
            text += f" = {count_text(self.size)}"
        if self.unit is Unit.TOKENS:
            text += " tokens"
        return text + (f" ({'; '.join(self.caveats)})" if self.caveats else "")


@dataclass(frozen=True)
class LearningRate:
    key: str
    value: float


@dataclass(frozen=True)
class ScalingCheck:
    """The rule broken, as (learning-rate key, message), and what was read, as notes."""

    issue: tuple[str, str] | None
    notes: tuple[str, ...] = ()


def count_text(x: float) -> str:
    """A batch size or count as written: 65536, not 6.554e+04."""
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else fmt_number(x)


def _segments(dotted: str) -> list[str]:
    return [normal(s) for s in dotted.split(".")]


def _training(dotted: str) -> bool:
    """False for a key under a validation/test/inference section (`val_dataloader.…`)."""
    sections = _segments(dotted)[:-1]
    return not any(NOT_TRAINING & set(s.split("_")) for s in sections)


def _parent(dotted: str) -> str:
    return dotted.rsplit(".", 1)[0] if "." in dotted else ""


def _leaf(dotted: str) -> str:
    return dotted.rsplit(".", 1)[-1]


def _neighbours(flat: Mapping[str, Any]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = defaultdict(set)
    for key in flat:
        found[_parent(key)].add(normal(_leaf(key)))
    return found


def _batch_name(key: str, neighbours: Mapping[str, set[str]]) -> tuple[int, BatchName] | None:
    """The table row a key matches (its index is its preference), or None."""
    names = spellings(_leaf(key))
    parent = _parent(key)
    section = normal(_leaf(parent)) if parent else ""
    for index, row in enumerate(BATCH_NAMES):
        if row.leaf not in names or (row.sections and section not in row.sections):
            continue
        if row.beside and not neighbours.get(parent, set()) & set(row.beside):
            continue
        return index, row
    return None


def _count(value: Any) -> float | None:
    """A count of at least 1; a list or "0,1" lists device ids; -1, 0, "auto" are not counts."""
    if isinstance(value, list | tuple):
        return float(len(value)) or None
    if isinstance(value, str) and "," in value:
        return float(len([p for p in value.split(",") if p.strip()])) or None
    number = first_number(value)
    return number if number is not None and number >= 1 else None


def _first(flat: Mapping[str, Any], names: tuple[str, ...] | Mapping[str, str]) -> str | None:
    """The first training key whose last segment is one of `names`."""
    return next((k for k in flat if _training(k) and set(spellings(_leaf(k))) & set(names)), None)


def _accumulation(flat: Mapping[str, Any]) -> tuple[str, float] | None:
    key = _first(flat, ACCUM_NAMES)
    number = first_number(flat[key]) if key is not None else None  # fairseq: `update_freq: [4]`
    return (key, number) if key is not None and number is not None and number >= 1 else None


def _devices(flat: Mapping[str, Any]) -> tuple[list[str], list[str], float]:
    """(factors, caveats, total): the world size, or devices per node x nodes, when stated."""
    factors: list[str] = []
    caveats: list[str] = []
    total = 1.0
    world = _first(flat, WORLD_NAMES)
    keys = [world] if world is not None else [_first(flat, DEVICE_NAMES), _first(flat, NODE_NAMES)]
    for key in (k for k in keys if k is not None):
        count = _count(flat[key])
        if count is None:
            caveats.append(f"{key} = {flat[key]!r} is not a count: not multiplied in")
        else:
            factors.append(f"{key} {count_text(count)}")
            total *= count
    return factors, caveats, total


def find_effective_batch(flat: Mapping[str, Any]) -> EffectiveBatch | None:
    """The effective batch a flattened config states, or None when it names no batch size."""
    neighbours = _neighbours(flat)
    best: tuple[tuple[int, int, int], str, BatchName, float] | None = None
    for position, (key, value) in enumerate(flat.items()):
        matched = _batch_name(key, neighbours) if _training(key) else None
        number = as_number(value) if matched is not None else None
        if matched is None or number is None or number < 1:  # -1: Ultralytics' AutoBatch
            continue
        index, row = matched
        rank = (_SCOPE_RANK[row.scope], index, position)
        if best is None or rank < best[0]:
            best = (rank, key, row, number)
    if best is None:
        return None
    _, key, row, size = best
    first = f"{key} {count_text(size)}" + (f" ({row.label})" if row.label else "")
    if row.scope is Scope.GLOBAL:
        if row.nominal is None:
            return EffectiveBatch(size, row.unit, (first,))
        nominal_key, default = row.nominal
        nominal_at = f"{_parent(key)}.{nominal_key}" if _parent(key) else nominal_key
        nominal = first_number(flat.get(nominal_at)) or default
        steps = max(round(nominal / size), 1)
        accum = (
            f"accumulation {steps} (up to the nominal batch {nominal_key} {count_text(nominal)})"
        )
        return EffectiveBatch(size * steps, row.unit, (first, accum))
    factors, total = [first], size
    accumulation = _accumulation(flat)
    if accumulation is not None:
        factors.append(f"{accumulation[0]} {count_text(accumulation[1])}")
        total *= accumulation[1]
    device_factors, caveats, devices = _devices(flat)
    return EffectiveBatch(total * devices, row.unit, (*factors, *device_factors), tuple(caveats))


def find_lr(flat: Mapping[str, Any]) -> LearningRate | None:
    """The learning rate: the most preferred spelling (`LR_NAMES`), then the first in the file."""
    best: tuple[tuple[int, int], LearningRate] | None = None
    for position, (key, value) in enumerate(flat.items()):
        names = spellings(_leaf(key))
        index = next((i for i, n in enumerate(LR_NAMES) if n in names), None)
        number = first_number(value) if index is not None else None
        if (
            index is not None
            and number is not None
            and (best is None or (index, position) < best[0])
        ):
            best = ((index, position), LearningRate(key, number))
    return best[1] if best is not None else None


def find_auto_scaling(flat: Mapping[str, Any], lr: LearningRate | None) -> str | None:
    """Why the framework scales the lr to the batch itself (MMEngine's `auto_scale_lr`), or None."""
    for rule in AUTO_SCALES:
        wanted = rule.key.split(".")
        for key, value in flat.items():
            if _segments(key)[-len(wanted) :] != wanted:
                continue
            if rule.when is AutoWhen.TRUE and value is True:
                return f"{key} = true: {rule.framework} scales the lr to the batch itself"
            if rule.when is AutoWhen.NO_LR and lr is None and first_number(value) is not None:
                return f"{key} = {value} and no lr: {rule.framework} computes the lr from the batch"
    return None


def _lr_keys(old: LearningRate | None, new: LearningRate | None) -> str:
    keys = dict.fromkeys(x.key for x in (old, new) if x is not None)
    return " → ".join(keys)


def _fits_a_rule(old_lr: float, new_lr: float, factor: float) -> str | None:
    for rule, scaled in (("linear", old_lr * factor), ("square-root", old_lr * math.sqrt(factor))):
        if math.isclose(new_lr, scaled, rel_tol=_TOLERANCE):
            return rule
    return None


def _moved_batch(
    old_bs: EffectiveBatch,
    new_bs: EffectiveBatch,
    old_lr: LearningRate | None,
    new_lr: LearningRate | None,
    lr_key: str,
) -> ScalingCheck:
    factor = new_bs.size / old_bs.size
    batch = f"effective batch {count_text(old_bs.size)} → {count_text(new_bs.size)}"
    batch += f" (x{fmt_number(factor)})"
    how = f" — reference {old_bs.how}; run {new_bs.how}"
    if old_lr is None:
        return ScalingCheck(
            (
                lr_key,
                f"{batch} but no lr in the reference: the linear scaling rule scales the "
                f"default lr x{fmt_number(factor)}; set lr explicitly{how}",
            )
        )
    rules = (
        f"the linear scaling rule gives lr = {fmt_number(old_lr.value * factor)}, "
        f"the square-root rule {fmt_number(old_lr.value * math.sqrt(factor))}"
    )
    if new_lr is None:
        message = (
            f"{batch} and lr {fmt_number(old_lr.value)} ({old_lr.key}) was removed (the "
            f"framework default now applies): {rules}{how}"
        )
        return ScalingCheck((lr_key, message))
    keys = _lr_keys(old_lr, new_lr)
    if math.isclose(old_lr.value, new_lr.value, rel_tol=1e-12):
        message = f"{batch} but lr stayed {fmt_number(old_lr.value)} ({keys}): {rules}{how}"
        return ScalingCheck((lr_key, message))
    change = f"lr {fmt_number(old_lr.value)} → {fmt_number(new_lr.value)} ({keys})"
    rule = _fits_a_rule(old_lr.value, new_lr.value, factor)
    if rule is None:
        ratio = fmt_number(new_lr.value / old_lr.value) if old_lr.value else "inf"
        return ScalingCheck((lr_key, f"{batch} but {change} (x{ratio}): {rules}{how}"))
    return ScalingCheck(None, (f"{batch}, {change} follows it (the {rule} rule){how}",))


def check_lr_scaling(old: Mapping[str, Any], new: Mapping[str, Any]) -> ScalingCheck:
    """Whether the lr follows the effective batch from the reference (`old`) to the run."""
    old_bs, new_bs = find_effective_batch(old), find_effective_batch(new)
    old_lr, new_lr = find_lr(old), find_lr(new)
    lr_key = (new_lr or old_lr or LearningRate("lr", 0.0)).key
    if old_bs is not None and new_bs is not None:
        if old_bs.unit is not new_bs.unit:
            return ScalingCheck(
                None,
                (
                    f"effective batches not comparable: the reference counts {old_bs.unit} "
                    f"({old_bs.how}), the run {new_bs.unit} ({new_bs.how})",
                ),
            )
        if bool(old_bs.caveats) != bool(new_bs.caveats):  # one side's device count is unknown
            return ScalingCheck(
                None,
                (
                    "effective batches not comparable: one config's device count is not a "
                    f"number (reference {old_bs.how}; run {new_bs.how})",
                ),
            )
        if not math.isclose(old_bs.size, new_bs.size, rel_tol=1e-9):
            auto = find_auto_scaling(new, new_lr)
            if auto is not None:
                note = f"effective batch {count_text(old_bs.size)} → {count_text(new_bs.size)}"
                return ScalingCheck(None, (f"{note}: {auto}",))
            return _moved_batch(old_bs, new_bs, old_lr, new_lr, lr_key)
    if old_lr is not None and new_lr is not None and not math.isclose(old_lr.value, new_lr.value):
        same = (
            f"the effective batch stayed {count_text(new_bs.size)} ({new_bs.how})"
            if new_bs is not None
            else "no batch size is set"
        )
        return ScalingCheck(
            (
                lr_key,
                f"lr {fmt_number(old_lr.value)} → {fmt_number(new_lr.value)} "
                f"({_lr_keys(old_lr, new_lr)}) while {same}: the linear scaling rule keeps "
                f"lr = {fmt_number(old_lr.value)} at this batch",
            )
        )
    if old_bs is not None and new_bs is not None:
        return ScalingCheck(
            None,
            (
                f"effective batch unchanged at {count_text(new_bs.size)} (reference: "
                f"{old_bs.how}; run: {new_bs.how}): the lr needs no scaling",
            ),
        )
    return ScalingCheck(None)
