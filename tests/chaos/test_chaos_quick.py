"""The chaos suite's CI subset (`python -m ops.chaos --quick`): kill -9 before claim, mid-run and
while releasing, and a few jobs over four workers, with the user's own assignments present. The
whole suite is `make chaos`; this keeps its table's total at zero in every CI run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(240)
def test_quick_chaos_table_is_all_zero(redis_url: str) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "ops.chaos", "--quick"],
        cwd=ROOT, capture_output=True, text=True, timeout=230,
        env={**os.environ, "COLABQ_CHAOS_REDIS_URL": redis_url},
    )  # fmt: skip
    total = [ln for ln in res.stdout.splitlines() if ln.startswith("| TOTAL")]
    assert total, res.stdout + res.stderr
    cells = [c.strip() for c in total[0].strip("|").split("|")]
    assert cells[1:10] == ["0"] * 9, res.stdout
    assert res.returncode == 0, res.stdout + res.stderr
