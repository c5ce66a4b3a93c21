"""Comparing and showing config values: small pure helpers shared by the config checks.

YAML 1.1 leaves `1e-3` a string, so numbers are compared by value across spellings and
formats; bools never count as numbers.
"""

from __future__ import annotations

import math
import re
from typing import Any

_NUMERIC = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def as_number(value: Any) -> float | None:
    """A number, or a string that spells one (`1e-3`); never a bool."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and _NUMERIC.match(value.strip()):
        return float(value)
    return None


def first_number(value: Any) -> float | None:
    """A number, or the first of a list of them: fairseq writes `lr: [0.0005]` and
    `update_freq: [4]` (one value per epoch; the first is the one the run starts with)."""
    if isinstance(value, list | tuple):
        return as_number(value[0]) if value else None
    return as_number(value)


def same_value(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    na, nb = as_number(a), as_number(b)
    if na is not None and nb is not None:
        return na == nb or math.isclose(na, nb, rel_tol=1e-12)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def show(value: Any, limit: int = 60) -> str:
    """A short display of a config value (strings quoted, YAML spellings for bool/null)."""
    if isinstance(value, bool):
        text = str(value).lower()
    elif value is None:
        text = "null"
    else:
        text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def fmt_number(x: float) -> str:
    return f"{x:.4g}"
