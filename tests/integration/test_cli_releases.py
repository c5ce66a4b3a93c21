"""Jobs through a real worker on the emulator as 0.7.5 (its default release), where 0.7.5's
assignment retries are part of the driver's contract:

- two 502s on the assignment POST: the CLI retries, one VM is assigned, the job SUCCEEDS, and
  the retries (which 0.7.5 logs only in its colab.log) are in `colabq logs`;
- a `colab new` that outlives colabq's timeout (the emulator stalls it) is reconciled by name:
  stalled after it wrote its record, its VM is adopted; stalled before the server assigned,
  nothing is left and the job is allocated once more, later. Either way: one assignment for the
  job, none left running, no `[?]`.

colabq's timeout on `new` is the CLI's worst case under the variables it sets, plus a margin:
here 1 s per request, 2 retries, 0.1 s of backoff (7 x 1 + 0.3 s) and 4 s: 11.3 s.
"""

from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from producer.cli import app
from tests.integration.conftest import Fleet
from worker.states import JobState

pytestmark = pytest.mark.integration
runner = CliRunner()
NO_SESSIONS = "[colab] No active sessions found on server."


@pytest.fixture
def fleet_env_extra() -> dict[str, str]:
    return {
        "COLABQ_COLAB_REQUEST_TIMEOUT_S": "1",
        "COLABQ_COLAB_ASSIGN_RETRIES": "2",
        "COLABQ_COLAB_RETRY_BACKOFF_S": "0.1",
        "COLABQ_COLAB_NEW_MARGIN_S": "4",
        "COLABQ_DRAIN_PROBE_S": "1",
    }


def submit(fleet: Fleet, name: str) -> str:
    path = fleet.root / "job.sh"
    path.write_text("echo 'epoch 1 loss=0.5'\n")
    result = runner.invoke(
        app,
        ["submit", str(path), "--name", name, "--wall", "10m", "--idle", "5s",
         "--local-store", str(fleet.root / "store"), "--json",
         "--waive", "config-diff", "--waive", "paths", "--waive", "monitoring"],
        env=fleet.env,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return str(json.loads(result.output)["jobs"][0]["job_id"])


def fault(fleet: Fleet, command: str, **fields: object) -> None:
    res = fleet.emu("faults", "set", command, json.dumps(fields))
    assert res.returncode == 0, res.stderr


def faults(fleet: Fleet) -> list[dict[str, object]]:
    return list(json.loads(fleet.emu("faults", "list").stdout))


def one_vm_and_none_left(fleet: Fleet, job_id: str) -> None:
    [assigned] = fleet.billing()
    assert assigned["unassigned_at"] is not None, "released"
    assert fleet.ledger.get(job_id).get("endpoint") == assigned["endpoint"]
    assert fleet.colab("sessions").stdout.strip() == NO_SESSIONS


def test_two_502s_on_the_assignment_one_vm_and_the_retries_in_the_log(fleet: Fleet) -> None:
    fault(fleet, "assign", http=502, times=2)
    job_id = submit(fleet, "mnist-mlp-bs64-lr1e-3-retried")
    assert fleet.wait_terminal(job_id) is JobState.SUCCEEDED, fleet.ledger.get(job_id).reason
    one_vm_and_none_left(fleet, job_id)
    assert faults(fleet) == [], "both 502s were met"
    logs = runner.invoke(app, ["logs", job_id], env=fleet.env)
    assert logs.exit_code == 0
    retried = [ln for ln in logs.output.splitlines() if "retried its assignment" in ln]
    assert len(retried) == 2, logs.output
    assert all("Assignment request failed; retrying in 0s (at " in ln for ln in retried)
    report = json.loads(fleet.ledger.get(job_id).get("report") or "{}")
    assert report["colab_cli"] == "0.7.5" and report["notes"] == []


def test_a_new_stalled_after_its_record_is_killed_and_its_vm_adopted(fleet: Fleet) -> None:
    fault(fleet, "new", hang=True, stall_at="state", times=1)
    job_id = submit(fleet, "mnist-mlp-bs64-lr1e-3-adopted")
    assert fleet.wait_terminal(job_id, 120) is JobState.SUCCEEDED, fleet.ledger.get(job_id).reason
    one_vm_and_none_left(fleet, job_id)
    text = "\n".join(ln.text for ln in fleet.ledger.read_log(job_id, count=1000))
    assert "ran past 11.3 s; killed" in text and "going on with it" in text, text


def test_a_new_stalled_before_the_server_assigned_leaves_nothing(fleet: Fleet) -> None:
    fault(fleet, "new", delay_s=60, times=1)
    started = time.monotonic()
    job_id = submit(fleet, "mnist-mlp-bs64-lr1e-3-again")
    assert fleet.wait_terminal(job_id, 150) is JobState.SUCCEEDED, fleet.ledger.get(job_id).reason
    assert time.monotonic() - started > 11, "the first `new` was killed at colabq's timeout"
    one_vm_and_none_left(fleet, job_id)
    reasons = [h.reason for h in fleet.ledger.history(job_id)]
    assert any("colab new failed" in r and "ran past 11.3 s" in r for r in reasons), reasons


def test_an_unlisted_release_runs_with_a_warning_in_the_report(fleet: Fleet) -> None:
    fleet.kill_worker()
    fleet.env.update(COLAB_EMU_VERSION="0.8.0", COLABQ_COLAB_UNLISTED_VERSION="0.8.0")
    fleet.restart_worker()
    log = fleet.root / "worker.log"  # the first worker's lines, then this one's
    deadline = time.monotonic() + 60
    while "colabq worker: drives colab CLI 0.8.0 (UNLISTED)" not in log.read_text():
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.2)
    assert "colabq worker: WARNING: colab CLI 0.8.0 is not a release colabq supports" in (
        log.read_text()
    )
    job_id = submit(fleet, "mnist-mlp-bs64-lr1e-3-unlisted")
    assert fleet.wait_terminal(job_id) is JobState.SUCCEEDED, fleet.ledger.get(job_id).reason
    report = json.loads(fleet.ledger.get(job_id).get("report") or "{}")
    assert report["colab_cli"] == "0.8.0"
    [note] = report["notes"]
    assert note.startswith("WARNING: colab CLI 0.8.0 is not a release colabq supports (0.7.4 and")
    shown = runner.invoke(app, ["status", job_id], env={**fleet.env, "COLUMNS": "200"})
    assert "colab cli" in shown.output and "0.8.0" in shown.output
    assert "WARNING: colab CLI 0.8.0 is not a release" in " ".join(shown.output.split())
