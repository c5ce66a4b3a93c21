"""The GPU time colabq counts for a job, checked against what the Colab emulator billed: one job
through a real Celery worker, its final report's duration and compute units, and `colabq
status` showing the same."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from producer import exitcodes
from producer.cli import app
from tests.integration.conftest import Fleet
from tests.integration.test_end_to_end import submit
from worker.colab import rates
from worker.states import JobState

pytestmark = pytest.mark.integration
runner = CliRunner()
JOB_S = 4


def billed(emu_home: Path, endpoint: str) -> dict[str, float]:
    """The emulator's billing record of the assignment at `endpoint` (written at unassign)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        path = emu_home / "billing.jsonl"
        for line in path.read_text().splitlines() if path.exists() else []:
            rec = json.loads(line)
            if rec["endpoint"] == endpoint:
                return {k: float(rec[k]) for k in ("assigned_at", "unassigned_at", "units")}
        time.sleep(0.2)
    raise AssertionError(f"no billing record for {endpoint}")


def test_held_time_is_what_the_emulator_billed(fleet: Fleet) -> None:
    job_id = submit(fleet, f"echo start\nsleep {JOB_S}\necho done\n")
    assert fleet.wait_terminal(job_id) is JobState.SUCCEEDED
    rec = fleet.ledger.get(job_id)
    report = json.loads(rec.get("report") or "{}")
    held_s, total_s = report["duration"]["held_s"], report["duration"]["total_s"]
    bill = billed(Path(fleet.env["COLAB_EMU_HOME"]), str(report["endpoint"]))
    billed_s = bill["unassigned_at"] - bill["assigned_at"]

    # The clock starts as `colab new` returns (just after the assign) and stops once the stop
    # is verified (just after the unassign): the two differ by those calls' latency only.
    assert JOB_S <= held_s < total_s
    assert abs(held_s - billed_s) <= 10, (held_s, billed_s)
    # The record's clock stopped a moment after the report was written (at the end).
    assert rec.get("held_since") is None
    assert float(rec.get("held_s") or 0) == pytest.approx(held_s, abs=1.0)
    cu = report["compute_units"]
    assert cu["gpu"] == "T4" and cu["rate_per_hour"] == 1.76
    assert cu["units"] == pytest.approx(1.76 * held_s / 3600, abs=1e-3)
    assert cu["units"] == pytest.approx(bill["units"], abs=1.76 * 10 / 3600)

    shown = runner.invoke(app, ["status", job_id, "--json"], env=fleet.env)
    assert shown.exit_code == exitcodes.OK, shown.output
    data = json.loads(shown.stdout)
    assert data["cu"] == pytest.approx(rates.units("T4", float(rec.get("held_s") or 0)), abs=1e-4)
    detail = runner.invoke(app, ["status", job_id], env={**fleet.env, "COLUMNS": "160"})
    assert "from submission to end; GPU held" in detail.output
    assert "(T4 at 1.76 units/h of GPU held)" in detail.output
