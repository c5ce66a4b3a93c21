"""The kill matrix's CI subset: three representative cells of `python -m ops.chaos --matrix` (the
whole matrix runs in `make chaos`), each judged from outside colabq: the launch exec SIGKILLed
while it lingers after its cell, the attach client's process group SIGKILLed mid-run, and the
worker's main process SIGKILLed while the job is PERSISTING (a supervisor restarts it). Each must
end SUCCEEDED with every numbered line exactly once in the log stream, one assignment, none left
open and no process of the job left behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
CELLS = ("launch exec@running", "attach client@running", "worker main@persisting")


@pytest.mark.timeout(240)
def test_quick_kill_matrix_cells_pass(redis_url: str) -> None:
    argv = [sys.executable, "-m", "ops.chaos", "--lanes", "2"]
    for cell in CELLS:
        argv += ["--cell", cell]
    res = subprocess.run(
        argv, cwd=ROOT, capture_output=True, text=True, timeout=230,
        env={**os.environ, "COLABQ_CHAOS_REDIS_URL": redis_url},
    )  # fmt: skip
    rows = [ln for ln in res.stdout.splitlines() if ln.startswith("| ") and "| verdict" not in ln]
    assert len(rows) == len(CELLS), res.stdout + res.stderr
    assert all(r.rstrip(" |").endswith("PASS") for r in rows), res.stdout
    assert res.returncode == 0, res.stdout + res.stderr
