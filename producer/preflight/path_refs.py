"""Which values of a config name paths the run needs, and what kind of path each is.

Owns the key vocabulary (`data_dir`, `pretrained`, `output_dir`, …), simple interpolation
(`${data.root}/train`, `${oc.env:HOME}`, `$HOME`), the "is this string a path at all" heuristic
and the Hub-id spelling of model/dataset keys (`facebook/dinov2-base` → `hf://…`). Checking
that the paths exist is `paths.py`'s.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class PathRole(StrEnum):
    INPUT = "input"  # must exist and be readable
    OUTPUT = "output"  # its parent must exist; the folder itself is created by the run
    CONFIG = "config"  # a file that must exist and be readable


@dataclass(frozen=True)
class PathRef:
    key: str  # dotted config key, or the option that named it
    value: str  # after interpolation; a URI or a local path as written
    role: PathRole
    expect_file: bool | None = None  # None: a file or a folder will do
    unresolved: str | None = None  # why the value could not be interpolated
    hub_uri: str | None = None  # what to check instead when no such local path exists


_INPUT_KEYS = frozenset(
    {
        "data",
        "dataset",
        "datasets",
        "data_dir",
        "data_path",
        "data_root",
        "dataset_dir",
        "dataset_path",
        "dataset_root",
        "train_path",
        "train_dir",
        "train_data",
        "train_file",
        "train_files",
        "val_path",
        "val_dir",
        "valid_path",
        "validation_file",
        "eval_path",
        "test_path",
        "test_file",
        "pretrained",
        "pretrained_path",
        "pretrained_model",
        "pretrained_weights",
        "weights",
        "checkpoint",
        "checkpoint_path",
        "ckpt",
        "ckpt_path",
        "resume",
        "resume_from",
        "resume_from_checkpoint",
        "init_from",
        "init_checkpoint",
        "load_from",
        "model_name_or_path",
        "pretrained_model_name_or_path",
        "tokenizer_path",
        "tokenizer_name",
        "vocab_file",
        "dataset_name",
    }
)
_OUTPUT_KEYS = frozenset(
    {
        "output_dir",
        "out_dir",
        "output_path",
        "save_dir",
        "save_path",
        "logging_dir",
        "log_dir",
        "checkpoint_dir",
        "ckpt_dir",
        "work_dir",
        "run_dir",
        "results_dir",
        "cache_dir",
    }
)
_CONFIG_KEYS = frozenset({"config", "config_path", "config_file", "base_config"})
_PATH_SUFFIX_KEYS = ("_path", "_paths", "_file", "_files", "_dir", "_dirs", "_root")
_OUTPUT_WORDS = frozenset(
    {
        "output",
        "out",
        "save",
        "log",
        "logs",
        "logging",
        "result",
        "results",
        "work",
        "cache",
        "export",
        "tensorboard",
        "wandb",
    }
)
_HUB_MODEL_KEYS = frozenset(
    {
        "pretrained",
        "pretrained_model",
        "init_from",
        "model_name_or_path",
        "pretrained_model_name_or_path",
        "tokenizer_name",
    }
)
_HUB_DATASET_KEYS = frozenset({"dataset", "dataset_name"})
_FILE_SUFFIXES = frozenset(
    {
        "pt",
        "pth",
        "ckpt",
        "bin",
        "safetensors",
        "h5",
        "hdf5",
        "pkl",
        "pickle",
        "npz",
        "npy",
        "yaml",
        "yml",
        "json",
        "jsonl",
        "toml",
        "csv",
        "tsv",
        "txt",
        "parquet",
        "arrow",
        "tar",
        "zip",
        "gz",
        "tgz",
        "onnx",
        "msgpack",
        "model",
        "py",
    }
)
_SUFFIX = re.compile(r"\.([A-Za-z][A-Za-z0-9]{0,9})$")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_REF = re.compile(r"\$\{([^}]+)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def is_uri(value: str) -> bool:
    return _URI.match(value) is not None


def _leaf(dotted: str) -> str:
    return re.sub(r"\[\d+\]$", "", dotted.rsplit(".", 1)[-1]).lower()


def role_of(dotted: str) -> PathRole | None:
    name = _leaf(dotted)
    if name in _CONFIG_KEYS:
        return PathRole.CONFIG
    if name in _OUTPUT_KEYS:
        return PathRole.OUTPUT
    if name in _INPUT_KEYS:
        return PathRole.INPUT
    if name.endswith(_PATH_SUFFIX_KEYS):
        return PathRole.OUTPUT if _OUTPUT_WORDS & set(name.split("_")) else PathRole.INPUT
    return None


def _expect_file(dotted: str, value: str, role: PathRole) -> bool | None:
    name = _leaf(dotted)
    if value.endswith(("/", "\\")) or name.endswith(("_dir", "_dirs", "_root")):
        return False
    if role is PathRole.CONFIG or name.endswith(("_file", "_files")):
        return True
    suffix = _SUFFIX.search(value)
    return True if suffix and suffix.group(1).lower() in _FILE_SUFFIXES else None


def looks_like_path(dotted: str, value: str) -> bool:
    if is_uri(value) or value.startswith(("/", "./", "../", "~", ".\\")):
        return True
    if "/" in value or "\\" in value or _SUFFIX.search(value):
        return True
    return _leaf(dotted).endswith(_PATH_SUFFIX_KEYS)  # `data_dir: imagenet` is a folder


def hub_uri(dotted: str, value: str) -> str | None:
    """`hf://…` for a model or dataset key spelled as a Hub id (`org/name`), else None."""
    if not _HUB_ID.match(value) or _SUFFIX.search(value):
        return None
    name = _leaf(dotted)
    if name in _HUB_MODEL_KEYS:
        return f"hf://{value}"
    if name in _HUB_DATASET_KEYS:
        return f"hf://datasets/{value}"
    return None


def interpolate(value: str, flat: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    """Resolve `${a.b}` (config keys), `${oc.env:VAR}`, `${VAR}` and `$VAR`; None if unknown."""
    for _ in range(8):  # references to references, without looping forever
        if "$" not in value:
            return value
        missing = False

        def sub(match: re.Match[str]) -> str:
            nonlocal missing
            name = match.group(1) or match.group(2)
            if name.startswith("oc.env:"):
                name = name.split(":", 1)[1].split(",", 1)[0]
                found: Any = env.get(name)
            else:
                found = flat.get(name, env.get(name))
            if not isinstance(found, str | int | float) or isinstance(found, bool):
                missing = True
                return match.group(0)
            return str(found)

        value = _REF.sub(sub, value)
        if missing:
            return None
    return None


def _flatten(data: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flatten(value, dotted + ".")
        else:
            yield dotted, value


def find_path_refs(
    data: Mapping[str, Any], env: Mapping[str, str]
) -> tuple[tuple[PathRef, ...], tuple[str, ...]]:
    """Path references in a config, and notes on path-keyed values taken not to be paths."""
    flat = dict(_flatten(data))
    refs: list[PathRef] = []
    notes: list[str] = []
    for dotted, raw in flat.items():
        role = role_of(dotted)
        if role is None:
            continue
        values = list(enumerate(raw)) if isinstance(raw, list | tuple) else [(None, raw)]
        for index, item in values:
            if not isinstance(item, str) or not item.strip():
                continue
            key = dotted if index is None else f"{dotted}[{index}]"
            resolved = interpolate(item, flat, env)
            if resolved is None:
                refs.append(PathRef(key, item, role, unresolved="cannot resolve its ${…} parts"))
                continue
            hub = hub_uri(key, resolved)
            if hub is not None:
                refs.append(PathRef(key, resolved, role, hub_uri=hub))
            elif looks_like_path(key, resolved):
                refs.append(PathRef(key, resolved, role, _expect_file(key, resolved, role)))
            else:
                notes.append(f"[note] {key} = {item!r} is not a path (a name?): not checked")
    return tuple(refs), tuple(notes)
