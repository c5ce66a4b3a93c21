"""The kill matrix's CI subset: two cells of `python -m ops.chaos --matrix` (the whole matrix runs
in `make chaos`) that no other CI test covers, each judged from outside colabq: the worker's pool
process SIGKILLed while it uploads (Celery replaces the process; the worker takes the job back),
and the worker's main process SIGKILLed while the job is PERSISTING (a supervisor restarts it).
Each must end SUCCEEDED with every numbered line exactly once in the log stream, one
assignment, none left open and no process of the job left behind. (The launch exec killed while
it lingers and the attach client killed mid-run are tests/integration's test_launch_linger and
test_run_on_vm.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
CELLS = ("pool child@uploading", "worker main@persisting")


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
