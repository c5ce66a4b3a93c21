"""The chaos suite's CI subset (`python -m ops.chaos --quick`): kill -9 before claim, mid-run and
while releasing, and a few jobs over four workers, with the user's own assignments present. The
whole suite is `make chaos` (its fleet-survives-its-members groups have their CI counterparts in
tests/integration: test_fleet_members, test_launch_linger, test_janitor_retained,
test_long_redis_outage, test_token_expiry); this keeps its table's total at zero in every CI
run, within the suite's ten minutes."""

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
