"""One figure of `make bench`: what colabq measured, its anchor in the same run, the target.

Every benchmark script prints its own lines and, when `COLABQ_BENCH_JSON` names a file, appends
one JSON line per figure to it; `ops/bench/table.py` runs them all and prints one table.

    fig = Figure("P7", "janitor pass, 10k jobs, 1k expired", "s", passes, anchors,
                 "two reads pipelined", "<= 0.2 s", met=median(passes) <= 0.2)
    emit([fig])
"""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import asdict, dataclass, field

JSON_ENV = "COLABQ_BENCH_JSON"
MIN_RUNS = 3


@dataclass
class Figure:
    key: str  # "P1" .. "P9", "M1" ..: the row's id
    name: str  # what is measured, in a few words
    unit: str  # "s", "ms", "MB", "jobs/s", "KB"
    colabq: list[float]  # one sample per run
    anchor: list[float] | None  # the same thing done the plainest way, in the same run
    anchor_name: str  # what the anchor is
    target: str  # "<= 0.25 s", ">= 0.5x anchor"
    met: bool
    note: str = ""  # what dominates what is left, or why a target cannot be met
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.colabq)

    @property
    def anchor_median(self) -> float | None:
        return statistics.median(self.anchor) if self.anchor else None

    @property
    def ratio(self) -> float | None:
        a = self.anchor_median
        return self.median / a if a else None


def spread(xs: list[float], unit: str) -> str:
    """`median (min-max) unit`; one sample prints alone."""
    if not xs:
        return "-"
    med = statistics.median(xs)
    if len(xs) == 1:
        return f"{_num(med)} {unit}"
    return f"{_num(med)} ({_num(min(xs))}-{_num(max(xs))}) {unit}"


def _num(x: float) -> str:
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def emit(figures: list[Figure]) -> None:
    """Print each figure on one line; append them to `$COLABQ_BENCH_JSON` when it is set."""
    for f in figures:
        anchor = f", anchor {spread(f.anchor, f.unit)} ({f.anchor_name})" if f.anchor else ""
        verdict = "met" if f.met else "NOT met"
        print(f"{f.key} {f.name}: {spread(f.colabq, f.unit)}{anchor}; target {f.target}: {verdict}")
        if f.note:
            print(f"   {f.note}")
    path = os.environ.get(JSON_ENV)
    if path:
        with open(path, "a") as out:
            for f in figures:
                out.write(json.dumps(asdict(f)) + "\n")


def load(path: str) -> list[Figure]:
    with open(path) as fh:
        return [Figure(**json.loads(line)) for line in fh if line.strip()]


def check_runs(runs: int) -> int:
    if runs < MIN_RUNS:
        raise SystemExit(f"--runs: {MIN_RUNS} or more (a median with its range)")
    return runs
