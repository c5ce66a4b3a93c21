"""Sweeps: a grid of values (`--sweep KEY=v1,v2`, or a job file's `sweep:` section) expanded
into one set of submit options per point, each with its own derived run name.

A key is a `colabq submit` option with a single value (`gpu`, `wall`, `config`, `epochs`, ...) or
`env.NAME`, an environment variable the job script sees on the VM. Run names: `{KEY}`
placeholders in the name are filled in (`--name coco-r50-lr{env.LR}`); without any, each point
appends `-<key><value>` per swept key (`coco-r50-lr3e-4-seed1`). Every name must be distinct.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from producer.jobfile import PAIR_KEYS, SubmitOptions, validate
from worker.errors import UserInputError

MAX_POINTS = 10_000
# Keys that cannot vary within one sweep: they name the sweep, or they are lists, or they say
# what code the sweep ships (one commit for every point).
_FIXED = frozenset(
    {"name", "idempotency_key", "sync", "expect", "waive", "code", "include", "repairs",
     "max_parallel", "after", *PAIR_KEYS}
)  # fmt: skip
_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Point:
    """One job of a sweep: its options and the swept values that made it."""

    options: SubmitOptions
    values: tuple[tuple[str, str], ...]


def parse_sweep_flags(flags: Sequence[str]) -> dict[str, list[str]]:
    """`--sweep KEY=v1,v2` (repeatable) -> {KEY: [v1, v2]}."""
    grid: dict[str, list[str]] = {}
    for flag in flags:
        key, sep, values = flag.partition("=")
        items = [v.strip() for v in values.split(",")]
        if not sep or not key.strip() or not all(items):
            raise UserInputError(f"--sweep {flag!r}: expected KEY=V1,V2 (e.g. env.LR=1e-4,3e-4).")
        if key in grid:
            raise UserInputError(f"--sweep {key} is given twice: list all its values once.")
        grid[key.strip()] = items
    return grid


def _check_key(key: str) -> None:
    if key.startswith("env."):
        return
    from producer.jobfile import FIELDS

    if key not in FIELDS or key in _FIXED:
        raise UserInputError(
            f"sweep key {key!r}: sweep a single-valued submit option (gpu, wall, config, "
            "epochs, ...) or env.NAME (an environment variable of the job)."
        )


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def _slug(key: str, value: str) -> str:
    short = key.removeprefix("env.").lower().replace("_", "")
    safe = _UNSAFE.sub("_", value).strip("._-") or "x"
    return safe.lower() if key == "gpu" else f"{short}{safe}"


def derive_name(template: str, values: Sequence[tuple[str, str]]) -> str:
    """The run name of one point: placeholders filled, or a suffix per swept key."""
    known = dict(values)
    if _PLACEHOLDER.search(template):

        def fill(m: re.Match[str]) -> str:
            if m[1] not in known:
                raise UserInputError(f"--name {template!r}: {{{m[1]}}} is not a swept key.")
            return _UNSAFE.sub("_", known[m[1]])

        return _PLACEHOLDER.sub(fill, template)
    return "-".join([template, *(_slug(k, v) for k, v in values)])


def expand(base: Mapping[str, Any], grid: Mapping[str, Sequence[Any]], where: str) -> list[Point]:
    """Every point of the grid (in the order its keys and values were given), validated."""
    for key in grid:
        _check_key(key)
    base = validate(base, where).model_dump()  # pairs as NAME=VALUE, whatever form they came in
    size = 1
    for values in grid.values():
        size *= len(values)
    if size > MAX_POINTS:
        raise UserInputError(f"The sweep has {size} points; the limit is {MAX_POINTS}.")
    template = str(base.get("name") or "")
    if not template:
        raise UserInputError("Name the run: --name (or name: in the job file).")
    points: list[Point] = []
    seen: dict[str, tuple[tuple[str, str], ...]] = {}
    for combo in itertools.product(*(list(v) for v in grid.values())):
        values = tuple((k, _text(v)) for k, v in zip(grid, combo, strict=True))
        fields = dict(base)
        env = [e for e in fields.get("env", ()) if e.split("=", 1)[0] not in _env_names(values)]
        env += [f"{k.removeprefix('env.')}={v}" for k, v in values if k.startswith("env.")]
        fields["env"] = env
        fields.update({k: v for k, v in values if not k.startswith("env.")})
        fields["name"] = derive_name(template, values)
        if fields["name"] in seen and values:
            raise UserInputError(
                f"The sweep derives run name {fields['name']!r} twice: put the swept keys in "
                "--name as {KEY} placeholders."
            )
        seen[fields["name"]] = values
        points.append(Point(validate(fields, where), values))
    return points


def _env_names(values: Sequence[tuple[str, str]]) -> set[str]:
    return {k.removeprefix("env.") for k, _ in values if k.startswith("env.")}
