"""Which expected artifacts a job's sync paths put in the store (as the wrapper uploads them:
each sync path under its last name, the log folder at logs/)."""

from __future__ import annotations

import pytest

from worker.store.coverage import covered, find_uncovered, uncovered_advice

# (expected, sync paths, covered?)
CASES = [
    ("checkpoints", ["checkpoints"], True),
    ("checkpoints/last.pt", ["checkpoints"], True),
    ("./checkpoints/", ["checkpoints"], True),
    ("results.json", ["out/results.json"], True),  # lands at its last name
    ("ckpt/model.pt", ["runs/exp1/ckpt"], True),
    ("logs", [], True),  # the log folder is always uploaded
    ("results.json", [], False),
    ("results.json", ["checkpoints"], False),
    ("out/results.json", ["out/results.json"], False),  # it lands at results.json
    ("checkpoints2", ["checkpoints"], False),
    ("check", ["checkpoints"], False),
    ("runs/exp1/ckpt", ["runs/exp1/ckpt"], False),
]


@pytest.mark.parametrize(("expected", "sync", "ok"), CASES)
def test_covered(expected: str, sync: list[str], ok: bool) -> None:
    assert covered(expected, sync) is ok


def test_the_advice_names_each_uncovered_path_and_where_sync_paths_land() -> None:
    sync = ["checkpoints", "out/results.json"]
    missing = find_uncovered(["checkpoints/a", "out/results.json", "metrics.csv"], sync)
    assert missing == ("out/results.json", "metrics.csv")
    line = uncovered_advice(missing, sync)
    assert "\n" not in line
    assert "--expect out/results.json, metrics.csv" in line
    assert "--sync out/results.json lands at results.json" in line
    assert "Nothing was enqueued" in line
