"""Diffing two configs as data: every changed, added, removed and renamed key, and what is risky.

Owns flattening (nested keys → dotted paths), pairing renamed spellings of a risky key, the
explained/unexplained decision, and the rules the new config breaks as a whole. The
batch-size/learning-rate scaling rule is `scaling.py`'s. Which file is compared with which is
`discovery.py`'s; the finding is `config_check.py`'s.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from producer.preflight.configs import LoadedConfig
from producer.preflight.risky_keys import RiskySlot, leaf, parent, same_meaning, slot_of
from producer.preflight.scaling import ScalingCheck, check_lr_scaling
from producer.preflight.values import as_number, same_value, show

NFS_SAFE_WORKERS = 4


class DiffKind(StrEnum):
    CHANGED = "changed"
    ADDED = "added"
    REMOVED = "removed"
    RENAMED = "renamed"  # a risky key under another spelling (`lr` → `learning_rate`)


@dataclass(frozen=True)
class KeyDifference:
    kind: DiffKind
    key: str  # dotted key in the intended config (in the reference, for REMOVED)
    old: Any = None
    new: Any = None
    old_key: str | None = None  # the reference's spelling, for RENAMED
    slot: RiskySlot | None = None
    material: bool = True  # False: renamed to an equivalent spelling, same value
    explained_by: str | None = None

    def describe(self) -> str:
        if self.kind is DiffKind.ADDED:
            text = f"added {self.key} = {show(self.new)}"
        elif self.kind is DiffKind.REMOVED:
            text = f"removed {self.key} (was {show(self.old)})"
        elif self.kind is DiffKind.RENAMED:
            text = (
                f"renamed {self.old_key} → {self.key} (same value {show(self.new)})"
                if not self.material
                else f"renamed {self.old_key} = {show(self.old)} → {self.key} = {show(self.new)}"
            )
        else:
            text = f"changed {self.key}: {show(self.old)} → {show(self.new)}"
        if self.slot is RiskySlot.SEED and self.kind is DiffKind.REMOVED:
            text += ": the run is no longer reproducible"
        return text


@dataclass(frozen=True)
class DiffIssue:
    """A rule broken by the new config as a whole (scaling rule, NFS workers, no seed)."""

    key: str
    message: str
    risky: bool
    explained_by: str | None = None


@dataclass(frozen=True)
class ConfigDiff:
    differences: tuple[KeyDifference, ...]
    issues: tuple[DiffIssue, ...]
    notes: tuple[str, ...] = ()  # what was read to judge, e.g. how each effective batch adds up

    @property
    def risky_unexplained(self) -> tuple[str, ...]:
        keys = [d.key for d in self.differences if _flagged(d) and d.slot is not None]
        return tuple(keys + [i.key for i in self.issues if i.risky and not i.explained_by])

    @property
    def other_unexplained(self) -> tuple[str, ...]:
        keys = [d.key for d in self.differences if _flagged(d) and d.slot is None]
        return tuple(keys + [i.key for i in self.issues if not i.risky and not i.explained_by])

    @property
    def explained(self) -> tuple[str, ...]:
        found = [d.key for d in self.differences if d.material and d.explained_by]
        return tuple(found + [i.key for i in self.issues if i.explained_by])


def _flagged(d: KeyDifference) -> bool:
    return d.material and not d.explained_by


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings → {"a.b.c": leaf}; lists and empty mappings are leaves."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def _mentions(note: str, name: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", note) is not None


def explanation(
    names: tuple[str, ...],
    intended: LoadedConfig,
    explain: Mapping[str, str],
    *,
    line_key: str | None = None,
) -> str | None:
    """The user's reason for a key: `--explain NAME`, a `# why:` on its line, or one naming it."""
    wanted = tuple(n for n in names if n)
    for name in wanted:
        if name in explain:
            return explain[name]
    if line_key is not None and (why := intended.why_for(line_key)):
        return why
    for note in intended.why_notes:
        if any(_mentions(note, name) for name in wanted):
            return note
    return None


def _names(key: str, old_key: str | None, slot: RiskySlot | None) -> tuple[str, ...]:
    names = [key, leaf(key)]
    if old_key:
        names += [old_key, leaf(old_key)]
    if slot is not None:
        names.append(slot.value)
    return tuple(dict.fromkeys(names))


def _pair_renames(
    removed: list[str], added: list[str]
) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """Pair removed and added spellings of one risky slot: same parent first, then a lone pair."""
    pairs: list[tuple[str, str]] = []
    for slot in RiskySlot:
        rs = [k for k in removed if slot_of(k) is slot]
        adds = [k for k in added if slot_of(k) is slot]
        for r in list(rs):
            match = next((a for a in adds if parent(a) == parent(r)), None)
            if match is not None:
                pairs.append((r, match))
                rs.remove(r)
                adds.remove(match)
        if len(rs) == 1 and len(adds) == 1:
            pairs.append((rs[0], adds[0]))
    paired_old = {r for r, _ in pairs}
    paired_new = {a for _, a in pairs}
    left_removed = [k for k in removed if k not in paired_old]
    left_added = [k for k in added if k not in paired_new]
    return pairs, left_removed, left_added


def diff_configs(
    reference: LoadedConfig, intended: LoadedConfig, explain: Mapping[str, str]
) -> ConfigDiff:
    before, after = flatten(reference.data), flatten(intended.data)
    removed = [k for k in before if k not in after]
    added = [k for k in after if k not in before]
    pairs, removed, added = _pair_renames(removed, added)
    diffs: list[KeyDifference] = []

    def note(
        kind: DiffKind,
        key: str,
        *,
        old_key: str | None = None,
        material: bool = True,
        line_key: str | None = None,
        old: Any = None,
        new: Any = None,
    ) -> None:
        slot = slot_of(key) or (slot_of(old_key) if old_key else None)
        why = explanation(_names(key, old_key, slot), intended, explain, line_key=line_key)
        diffs.append(KeyDifference(kind, key, old, new, old_key, slot, material, why))

    for key in before:
        if key in after and not same_value(before[key], after[key]):
            note(DiffKind.CHANGED, key, line_key=key, old=before[key], new=after[key])
    for old_key, key in pairs:
        a, b = before[old_key], after[key]
        material = not (same_meaning(old_key, key) and same_value(a, b))
        note(DiffKind.RENAMED, key, old_key=old_key, material=material, line_key=key, old=a, new=b)
    for key in added:
        note(DiffKind.ADDED, key, line_key=key, new=after[key])
    for key in removed:
        note(DiffKind.REMOVED, key, old=before[key])
    scaling = check_lr_scaling(before, after)
    issues = tuple(_issues(scaling, before, after, intended, explain))
    return ConfigDiff(tuple(diffs), issues, scaling.notes)


def _issues(
    scaling: ScalingCheck,
    old: dict[str, Any],
    new: dict[str, Any],
    intended: LoadedConfig,
    explain: Mapping[str, str],
) -> Iterator[DiffIssue]:
    if scaling.issue is not None:
        key, message = scaling.issue
        names = _names(key, None, RiskySlot.LEARNING_RATE)
        yield DiffIssue(key, message, True, explanation(names, intended, explain, line_key=key))
    for key, value in new.items():
        workers = as_number(value) if slot_of(key) is RiskySlot.WORKERS else None
        if workers is not None and workers > NFS_SAFE_WORKERS:
            message = (
                f"{key} = {show(value)} > {NFS_SAFE_WORKERS}: on a network file system (NFS, a "
                "FUSE mount, Drive) that many loader workers stall or crash; use 2-4 there"
            )
            names = _names(key, None, RiskySlot.WORKERS)
            yield DiffIssue(
                key, message, False, explanation(names, intended, explain, line_key=key)
            )
    if not any(slot_of(k) is RiskySlot.SEED for k in (*old, *new)):
        message = "no seed in either config: set one so the run can be reproduced"
        yield DiffIssue("seed", message, False, explanation(("seed",), intended, explain))
