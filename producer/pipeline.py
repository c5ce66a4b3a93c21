"""A job file's `steps:`: several jobs from one file (train -> evaluate -> export), each step a
mapping of keys over the file's own, each after the previous (ok), enqueued in one atomic step
(`worker.flow.deps`).

```yaml
script: train.sh
name: mnist
steps:
  - {name: mnist-train, wall: 2h}
  - {name: mnist-eval, script: eval.sh}
```
A step without a `name` gets the file's with `-<N>` (1 for the first step).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worker.errors import UserInputError

if TYPE_CHECKING:
    from producer.sweep import Point

MAX_STEPS = 50


def read_steps(path: Path) -> list[dict[str, Any]] | None:
    """The file's steps (None without a `steps:` key), their paths made absolute as the file's."""
    import yaml

    from producer.jobfile import FILE_RELATIVE

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None  # said by read_job_file, which reads it next
    if not isinstance(data, dict) or "steps" not in data:
        return None
    steps = data["steps"]
    if (
        not isinstance(steps, list)
        or not 0 < len(steps) <= MAX_STEPS
        or not all(isinstance(s, dict) for s in steps)
    ):
        raise UserInputError(
            f"Job file '{path}': steps must be a list of 1 to {MAX_STEPS} mappings of keys "
            "(steps: [{name: train}, {name: eval, script: eval.sh}])."
        )
    base = path.resolve().parent
    out = []
    for step in steps:
        step = dict(step)
        for key in FILE_RELATIVE:
            if isinstance(step.get(key), str):
                step[key] = str(base / step[key])
        out.append(step)
    return out


def step_points(
    fields: Mapping[str, Any],
    steps: list[dict[str, Any]],
    typed: Mapping[str, Any],
    where: str,
    swept: bool,
) -> list[Point]:
    """One point per step: the file's keys, the step's over them, the flags over both; each
    step after the previous one (ok), besides any `after` it names."""
    from producer.jobfile import merge_flags, validate
    from producer.sweep import Point

    if swept:
        raise UserInputError(f"{where}: steps and a sweep do not combine: submit them apart.")
    points = []
    for i, step in enumerate(steps):
        if "sweep" in step or "steps" in step:
            raise UserInputError(f"{where}: step {i + 1} cannot hold a sweep or steps.")
        merged = {**fields, **step}
        if "name" not in step and fields.get("name"):
            merged["name"] = f"{fields['name']}-{i + 1}"
        opts = validate(merge_flags(merged, typed), f"{where}, step {i + 1}")
        if opts.script is None or not opts.name:
            raise UserInputError(f"{where}, step {i + 1}: name its script and its name.")
        after = (*opts.after, f"@{i - 1}:ok") if i else opts.after
        points.append(Point(opts.model_copy(update={"after": tuple(after)}), ()))
    return points
