"""Jobs whose results go to the Hub: a real Celery worker, the Colab emulator, and the real
huggingface_hub client (worker and VM side) against the local Hub-compatible server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from producer.cli import app
from tests.hub import conftest as hub_conftest
from tests.hub.conftest import Hub, worker_hub_env
from tests.integration.conftest import Fleet
from worker.spec import ArtifactDest
from worker.states import JobState
from worker.store.hub import HubStore

_client_env = hub_conftest._client_env
make_hub = hub_conftest.make_hub
hub = hub_conftest.hub

pytestmark = pytest.mark.integration
runner = CliRunner()
NO_SESSIONS = "[colab] No active sessions found on server."
REPO = "alice/runs"
WAIVE = ["--waive", "config-diff", "--waive", "paths", "--waive", "monitoring"]


@pytest.fixture
def fleet_env_extra(hub: Hub, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    token = tmp_path_factory.mktemp("secret") / "hf_token"
    token.write_text(hub.tokens["alice_write"])
    token.chmod(0o600)
    return worker_hub_env(hub.url, token)


def submit(fleet: Fleet, script: str, *extra: str, name: str = "mnist-mlp-bs64-lr1e-3-hub") -> str:
    path = fleet.root / "job.sh"
    path.write_text(script)
    result = runner.invoke(
        app,
        ["submit", str(path), "--name", name, "--wall", "10m", "--idle", "5s",
         "--hub-repo", REPO, "--json", *WAIVE, *extra],
        env=fleet.env,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return str(json.loads(result.output)["jobs"][0]["job_id"])


def tree(hub: Hub) -> dict[str, int]:
    files = hub.api().list_repo_tree(REPO, recursive=True)
    return {f.path: f.size for f in files if getattr(f, "size", None) is not None}


TRAIN = "echo epoch-1\nmkdir -p ckpt && head -c 2048 /dev/urandom > ckpt/model.bin\necho done\n"


def test_logs_checkpoint_and_exit_code_land_on_the_hub_and_are_verified(
    fleet: Fleet, hub: Hub
) -> None:
    job_id = submit(fleet, TRAIN, "--sync", "ckpt", "--expect", "ckpt")
    assert fleet.wait_terminal(job_id) is JobState.SUCCEEDED, fleet.ledger.get(job_id).reason
    files = tree(hub)
    prefix = "mnist-mlp-bs64-lr1e-3-hub"
    assert files[f"{prefix}/ckpt/model.bin"] == 2048
    assert files[f"{prefix}/logs/{job_id}/exit_code"] > 0
    assert f"{prefix}/logs/{job_id}/job.log" in files
    assert hub.api().repo_info(REPO).private is True
    report = json.loads(fleet.ledger.get(job_id).get("report") or "{}")
    assert report["artifacts"] == f"hf://{REPO}/{prefix}"
    assert fleet.colab("sessions").stdout.strip() == NO_SESSIONS


def test_missing_expected_artifact_fails_verification(fleet: Fleet) -> None:
    job_id = submit(fleet, "echo no checkpoint written\n", "--sync", "ckpt", "--expect", "ckpt")
    assert fleet.wait_terminal(job_id) is JobState.FAILED
    assert "missing: ckpt" in fleet.ledger.get(job_id).reason


def test_transient_5xx_on_a_commit_is_retried_and_succeeds(fleet: Fleet, hub: Hub) -> None:
    hub.admin.fail_next(method="POST", path=r"/commit/", status=503, count=1)
    job_id = submit(fleet, TRAIN, "--sync", "ckpt", "--expect", "ckpt")
    assert fleet.wait_terminal(job_id) is JobState.SUCCEEDED, fleet.ledger.get(job_id).reason
    commits = [r for r in hub.requests("/commit/") if r["method"] == "POST"]
    assert [r["status"] for r in commits][:2] == [503, 200]


def test_hub_down_at_final_upload_recovers_the_retained_vm_and_loses_nothing(
    fleet: Fleet, hub: Hub
) -> None:
    script = "echo started\nsleep 3\n" + TRAIN
    job_id = submit(fleet, script, "--sync", "ckpt", "--expect", "ckpt")
    deadline = time.monotonic() + 60
    while not any("started" in ln.text for ln in fleet.ledger.read_log(job_id)):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    hub.admin.down(path=r"/commit/")
    assert fleet.wait_terminal(job_id) is JobState.FAILED
    hub.admin.clear_faults()
    rec = fleet.ledger.get(job_id)
    assert JobState.RETAINED in [h.state for h in fleet.ledger.history(job_id)]
    report = json.loads(rec.get("report") or "{}")
    local = Path(report["results_local"].split(":", 1)[1])
    assert (local / "ckpt" / "model.bin").stat().st_size == 2048
    assert (local / "logs" / "exit_code").read_text().strip() == "0"
    assert report["remaining_endpoint"] is None
    assert fleet.colab("sessions").stdout.strip() == NO_SESSIONS


def test_resume_downloads_the_named_checkpoint_and_the_job_sees_its_path(
    fleet: Fleet, hub: Hub
) -> None:
    first = submit(fleet, TRAIN, "--sync", "ckpt", "--expect", "ckpt", name="mnist-mlp-seg1")
    assert fleet.wait_terminal(first) is JobState.SUCCEEDED
    script = 'echo "resume path: $COLABQ_RESUME_FROM"\nls "$COLABQ_RESUME_FROM"\n'
    second = submit(
        fleet, script, "--resume-from", f"hf://{REPO}/mnist-mlp-seg1/ckpt", name="mnist-mlp-seg2"
    )
    assert fleet.wait_terminal(second) is JobState.SUCCEEDED, fleet.ledger.get(second).reason
    logs = "\n".join(ln.text for ln in fleet.ledger.read_log(second))
    assert "resume path: /" in logs and "model.bin" in logs


@pytest.mark.parametrize("what", ["missing", "empty"])
def test_resume_refuses_missing_or_empty_checkpoint_before_allocation(
    fleet: Fleet, hub: Hub, what: str
) -> None:
    if what == "empty":
        empty = fleet.root / "empty"
        empty.mkdir()
        (empty / "weights.bin").write_bytes(b"")
        HubStore(hub.url, hub.tokens["alice_write"]).check_output_repo(
            ArtifactDest(kind="hf", repo=REPO)
        )
        hub.api().upload_folder(folder_path=str(empty), repo_id=REPO, path_in_repo="old/ckpt")
    job_id = submit(fleet, "echo should-not-run\n", "--resume-from", f"hf://{REPO}/old/ckpt")
    assert fleet.wait_terminal(job_id) is JobState.FAILED
    rec = fleet.ledger.get(job_id)
    assert "pre-allocation check failed" in rec.reason
    assert rec.get("endpoint") is None and rec.get("session") is None  # nothing allocated
    assert fleet.colab("sessions").stdout.strip() == NO_SESSIONS


def test_token_only_in_the_authorization_header_and_never_in_logs(fleet: Fleet, hub: Hub) -> None:
    job_id = submit(fleet, TRAIN, "--sync", "ckpt")
    assert fleet.wait_terminal(job_id) is JobState.SUCCEEDED
    token = hub.tokens["alice_write"]
    requests = hub.admin.requests()
    assert requests and all(r["token_leaks"] == [] for r in requests)
    assert any("authorization" in r.get("headers", {}) for r in requests), requests[0]
    logs = "\n".join(ln.text for ln in fleet.ledger.read_log(job_id))
    assert token not in logs
    for log in Path(fleet.root).rglob("*.log"):
        assert token not in log.read_text(errors="replace"), log
    assert token not in os.environ.get("COLABQ_HF_TOKEN_FILE", "")


def test_host_lost_mid_run_adoption_from_another_host_verifies_the_private_repo(
    fleet: Fleet, hub: Hub
) -> None:
    """Recovery meets the Hub: the adopter verifies a private repo with its own token file and
    endpoint (a check without them would see an empty repo and fail a good job)."""
    script = "echo started\nsleep 4\n" + TRAIN
    job_id = submit(fleet, script, "--sync", "ckpt", "--expect", "ckpt")
    deadline = time.monotonic() + 60
    while not any(ln.text == "started" for ln in fleet.ledger.read_log(job_id)):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    fleet.lose_host()
    time.sleep(4)  # the lease expires
    res = subprocess.run(
        [sys.executable, "-m", "producer.cli", "adopt", job_id],
        env=fleet.other_host(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    rec = fleet.ledger.get(job_id)
    assert rec.state is JobState.SUCCEEDED and rec.get("exit_code") == "0", rec.reason
    assert hub.api().repo_info(REPO).private is True
    assert tree(hub)["mnist-mlp-bs64-lr1e-3-hub/ckpt/model.bin"] == 2048
    assert fleet.colab("sessions").stdout.strip() == NO_SESSIONS


def test_worker_killed_the_janitor_settles_the_job_from_the_private_repo(
    fleet: Fleet, hub: Hub
) -> None:
    """The janitor verifies with the token and endpoint of the host it runs on: a private repo
    holding the results settles the dead worker's job SUCCEEDED, with the VM's exit code."""
    job_id = submit(fleet, "echo started\nsleep 2\n" + TRAIN, "--sync", "ckpt", "--expect", "ckpt")
    deadline = time.monotonic() + 60
    while not any(ln.text == "started" for ln in fleet.ledger.read_log(job_id)):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    fleet.kill_worker()  # the worker only: its watchdog lives on and stops the idle session
    deadline = time.monotonic() + 90
    while fleet.colab("sessions").stdout.strip() != NO_SESSIONS:
        assert time.monotonic() < deadline, "the watchdog never released the session"
        time.sleep(0.5)
    time.sleep(4)  # the lease (3 s here) expires
    res = subprocess.run(
        [sys.executable, "-m", "producer.cli", "janitor", "--act", "--json"],
        env=fleet.other_host("beat"), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    [row] = [r for r in json.loads(res.stdout)["rows"] if r["subject"] == job_id]
    assert row["did"] == "did: settle SUCCEEDED", row
    rec = fleet.ledger.get(job_id)
    assert rec.state is JobState.SUCCEEDED and rec.get("exit_code") == "0", rec.reason
    assert json.loads(rec.get("report") or "{}")["exit_code"] == 0
    assert hub.api().repo_info(REPO).private is True


def test_a_sweep_to_a_private_hub_repo_runs_each_point_with_its_env(fleet: Fleet, hub: Hub) -> None:
    path = fleet.root / "sweep.sh"
    path.write_text('echo "seed=$SEED"\n' + TRAIN)
    result = runner.invoke(
        app,
        ["submit", str(path), "--name", "mnist-mlp-bs64-lr1e-3-sweep", "--wall", "10m",
         "--idle", "5s", "--hub-repo", REPO, "--sync", "ckpt", "--expect", "ckpt",
         "--sweep", "env.SEED=1,2", "--json", *WAIVE],
        env=fleet.env,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    jobs = json.loads(result.output)["jobs"]
    assert [j["run"] for j in jobs] == [f"mnist-mlp-bs64-lr1e-3-sweep-seed{s}" for s in (1, 2)]
    files = {}
    for job, seed in zip(jobs, (1, 2), strict=True):
        job_id = job["job_id"]
        assert fleet.wait_terminal(job_id) is JobState.SUCCEEDED, fleet.ledger.get(job_id).reason
        logs = [ln.text for ln in fleet.ledger.read_log(job_id)]
        assert f"seed={seed}" in logs
        report = json.loads(fleet.ledger.get(job_id).get("report") or "{}")
        assert report["duration"]["held_s"] > 0 and report["compute_units"]["units"] > 0
        files = tree(hub)
        assert files[f"{job['run']}/ckpt/model.bin"] == 2048
    assert hub.api().repo_info(REPO).private is True
    assert fleet.colab("sessions").stdout.strip() == NO_SESSIONS
