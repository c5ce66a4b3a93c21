"""The chaos suite's CI subset (`python -m ops.chaos --quick`): kill -9 before claim, mid-run and
while releasing, and a few jobs over four workers, with the user's own assignments present; and
one of the fleet-survives-its-members groups, `retained-orphan` (about 40 s: the Hub refuses the
final upload, the owner's host is lost while its VM is RETAINED, beat's janitor adopts it and
recovers the results, with the user's assignments left alone). The whole suite is `make chaos`;
this keeps its table's total at zero in every CI run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def assert_all_zero(redis_url: str, *args: str) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "ops.chaos", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=230,
        env={**os.environ, "COLABQ_CHAOS_REDIS_URL": redis_url},
    )  # fmt: skip
    total = [ln for ln in res.stdout.splitlines() if ln.startswith("| TOTAL")]
    assert total, res.stdout + res.stderr
    cells = [c.strip() for c in total[0].strip("|").split("|")]
    counters = cells[1:-1]
    assert len(counters) >= 9 and set(counters) == {"0"}, res.stdout
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.timeout(240)
def test_quick_chaos_table_is_all_zero(redis_url: str) -> None:
    assert_all_zero(redis_url, "--quick")


@pytest.mark.timeout(240)
def test_retained_orphan_group_is_all_zero(redis_url: str) -> None:
    assert_all_zero(redis_url, "--only", "retained-orphan")
