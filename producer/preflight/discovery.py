"""Finding the configs a run could be compared with, and choosing its reference.

Owns the candidate scan (the `find configs recipes experiments -maxdepth 3 -mtime -30` of the
original checklist) and the family heuristic. Parsing is `configs.py`'s; only the files the
choice actually needs are parsed.

Family heuristic, in order:
1. By path: a candidate is of the intended config's family when it sits in the same folder, or
   when its file name shares the family token (the first name token that is not a version,
   number or generic word: `resnet50_bs512.yaml` → `resnet50`).
   The newest such candidate wins unless both configs declare a model (`model.name`,
   `model_name`, `arch`, …) or a task (`task`, `task.name`) and they differ; then the next.
2. By content: otherwise, up to `CONTENT_SCAN_LIMIT` of the newest remaining candidates are
   parsed and the newest declaring the same model or task wins.
A framework's defaults are never a reference: with no candidate, there is no reference.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from producer.preflight.configs import CONFIG_SUFFIXES, ConfigParseError, LoadedConfig, load_config

CONFIG_ROOTS: tuple[str, ...] = ("configs", "recipes", "experiments")
MAX_DEPTH = 3  # as `find ROOT -maxdepth 3`: ROOT/a/b/file.yaml is the deepest file
MAX_AGE_DAYS = 30.0
CONTENT_SCAN_LIMIT = 50

_GENERIC = frozenset(
    {
        "base",
        "baseline",
        "default",
        "defaults",
        "config",
        "cfg",
        "exp",
        "experiment",
        "run",
        "new",
        "old",
        "final",
        "test",
        "debug",
        "copy",
        "tmp",
        "train",
        "training",
        "recipe",
    }
)
_VERSIONISH = re.compile(r"^(v?\d+(\.\d+)*|r\d+|rev\d+)$")
_MODEL_KEYS = (
    "model.name",
    "model.type",
    "model.arch",
    "model_name",
    "model_type",
    "arch",
    "architecture",
    "model",
)
_TASK_KEYS = ("task", "task.name", "task_name")


@dataclass(frozen=True, slots=True)
class ConfigCandidate:
    location: str  # absolute path; a string because thousands are built per scan
    mtime_s: float  # seconds since the epoch

    @property
    def path(self) -> Path:
        return Path(self.location)


@dataclass(frozen=True)
class ReferenceChoice:
    """The chosen reference (or None) and, in words, why."""

    reference: LoadedConfig | None
    reason: str
    candidates_seen: int
    unparsable: tuple[ConfigParseError, ...] = ()


def find_config_candidates(
    repo: Path,
    *,
    now: datetime,
    max_age_days: float = MAX_AGE_DAYS,
    max_depth: int = MAX_DEPTH,
    roots: Iterable[str] = CONFIG_ROOTS,
) -> tuple[ConfigCandidate, ...]:
    """Config files under the roots, at most `max_depth` deep, modified within `max_age_days`.

    Newest first. Symlinked folders are not followed (as `find` without `-L`); each file is
    stat'ed once, and only when its name has a config suffix.
    """
    cutoff_s = now.timestamp() - max_age_days * 86400.0
    base = os.path.realpath(repo)  # candidates are real paths, so they compare as plain strings
    found: list[tuple[float, str]] = []
    for root in roots:
        stack = [(os.path.join(base, root), 1)]
        while stack:
            folder, depth = stack.pop()
            try:
                entries = os.scandir(folder)
            except OSError:
                continue
            with entries:
                for entry in entries:
                    if entry.name.endswith(CONFIG_SUFFIXES):
                        try:
                            st = entry.stat()
                        except OSError:
                            continue
                        if st.st_mtime > cutoff_s and stat.S_ISREG(st.st_mode):
                            found.append((st.st_mtime, entry.path))
                    elif depth < max_depth and entry.is_dir(follow_symlinks=False):
                        stack.append((entry.path, depth + 1))
    found.sort(reverse=True)  # newest first; equal mtimes in a fixed (reverse path) order
    return tuple(ConfigCandidate(location, mtime_s) for mtime_s, location in found)


def family_token(path: Path | str) -> str | None:
    stem = os.path.splitext(os.path.basename(path))[0]
    for token in re.split(r"[-_.\s]+", stem.lower()):
        if token and token not in _GENERIC and not _VERSIONISH.match(token):
            return token
    return None


def _flat_lookup(data: Mapping[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def declared_family(data: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(model, task) as the config declares them, lower-cased; None where not declared."""

    def first(keys: tuple[str, ...]) -> str | None:
        for key in keys:
            value = _flat_lookup(data, key)
            if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
                return str(value).lower()
        return None

    return first(_MODEL_KEYS), first(_TASK_KEYS)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _contradicts(a: tuple[str | None, str | None], b: tuple[str | None, str | None]) -> bool:
    return any(x is not None and y is not None and x != y for x, y in zip(a, b, strict=True))


def _shares(a: tuple[str | None, str | None], b: tuple[str | None, str | None]) -> bool:
    return any(x is not None and x == y for x, y in zip(a, b, strict=True))


def choose_reference(
    intended: LoadedConfig,
    candidates: tuple[ConfigCandidate, ...],
    *,
    load: Callable[[Path], LoadedConfig] = load_config,
) -> ReferenceChoice:
    """The newest candidate of the intended config's family (see the module docstring)."""
    own = os.path.realpath(intended.path)
    folder, token = os.path.dirname(own), family_token(intended.path)
    wanted = declared_family(intended.data)
    broken: list[ConfigParseError] = []
    others = [c for c in candidates if c.location != own]

    def parsed(c: ConfigCandidate) -> LoadedConfig | None:
        try:
            if _same_file(c.location, own):  # the intended config reached by another spelling
                return None
            return load(c.path)
        except ConfigParseError as exc:
            broken.append(exc)
        except OSError:
            pass
        return None

    rest: list[ConfigCandidate] = []
    for cand in others:  # newest first, so the first acceptable one is the answer
        same_folder = os.path.dirname(cand.location) == folder
        if not same_folder and (token is None or family_token(cand.location) != token):
            rest.append(cand)
            continue
        ref = parsed(cand)
        if ref is not None and not _contradicts(wanted, declared_family(ref.data)):
            how = "same folder" if same_folder else f"name token {token!r}"
            return ReferenceChoice(
                ref, f"newest config of the same family, {how}", len(others), tuple(broken)
            )
    if wanted != (None, None):
        for cand in rest[:CONTENT_SCAN_LIMIT]:
            ref = parsed(cand)
            if ref is not None and _shares(wanted, declared_family(ref.data)):
                return ReferenceChoice(
                    ref, "newest config declaring the same model/task", len(others), tuple(broken)
                )
    why = (
        f"none of {len(others)} recent configs is of the same family"
        if others
        else "no other config modified in the last 30 days under " + "/, ".join(CONFIG_ROOTS) + "/"
    )
    return ReferenceChoice(None, why, len(others), tuple(broken))
