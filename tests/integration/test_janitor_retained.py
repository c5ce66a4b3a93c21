"""A retained VM whose owner's host is lost, on the emulator with the local Hub: the Hub refuses
the final upload (the VM keeps itself: it holds the only copy), the recovery of its results fails
too, then the host goes. The janitor adopts the job; the adopter keeps the VM while its recovery
fails (the job's reason, and the VM's row of every pass, say so), then recovers the results to
its own host once it can, and only then releases the VM."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.hub import conftest as hub_conftest
from tests.hub.conftest import Hub, worker_hub_env
from tests.integration.conftest import Fleet
from tests.integration.test_hub_jobs import NO_SESSIONS, TRAIN, submit
from tests.integration.test_janitor_fleet import adopt_row, adopters, beat_host, janitor, rows
from worker.states import JobState

hub = hub_conftest.hub
make_hub = hub_conftest.make_hub
__all__ = ["adopters", "hub", "make_hub"]  # fixtures, imported

pytestmark = pytest.mark.integration


@pytest.fixture
def fleet_env_extra(hub: Hub, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    token = tmp_path_factory.mktemp("secret") / "hf_token"
    token.write_text(hub.tokens["alice_write"])
    token.chmod(0o600)
    # A failed recovery is tried again after 1, 2, 2 ... s; nobody but colabq stops the VM.
    return {**worker_hub_env(hub.url, token), "COLABQ_REATTACH_BACKOFF_MAX_S": "2",
            "COLABQ_RELEASE_HOLD_S": "600"}  # fmt: skip


def wait_until(what: str, check: object, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.2)


def adopter_says(fleet: Fleet, job_id: str, text: str) -> bool:
    """`text` in the job's log after the adopter took it."""
    lines = [ln.text for ln in fleet.ledger.read_log(job_id, count=100_000)]
    adopted = [i for i, t in enumerate(lines) if "adopted by" in t]
    return bool(adopted) and any(text in t for t in lines[adopted[-1] :])


def test_retained_owner_lost_the_adopter_keeps_the_vm_until_it_recovers_the_results(
    fleet: Fleet, hub: Hub, adopters: list[int]
) -> None:
    job_id = submit(fleet, "echo started\nsleep 2\n" + TRAIN, "--sync", "ckpt", "--expect", "ckpt")
    wait_until("started", lambda: any(ln.text == "started" for ln in fleet.ledger.read_log(job_id)))
    hub.admin.down(path=r"/commit/")  # the final upload fails: the VM keeps itself
    assert (
        fleet.emu("faults", "set", "ls", json.dumps({"fail": "Contents API: 503"})).returncode == 0
    )
    failing = "recovering the results failed"
    wait_until("the owner's recovery fails", lambda: failing in fleet.ledger.get(job_id).reason)
    assert fleet.ledger.get(job_id).state is JobState.RETAINED
    endpoint = str(fleet.ledger.get(job_id).get("endpoint"))
    fleet.lose_host()

    row = adopt_row(fleet, job_id, adopters)
    assert "only copy" in row["why"] and failing in row["why"], row
    # The adopter's recovery fails too: it keeps the VM, and says so on the job and in the
    # VM's row of every pass.
    wait_until("the adopter says its recovery fails", lambda: adopter_says(fleet, job_id, failing))
    assert failing in fleet.ledger.get(job_id).reason
    assert fleet.ledger.get(job_id).state is JobState.RETAINED
    for _ in range(2):
        [vm_row] = rows(janitor(beat_host(fleet)), endpoint)
        assert vm_row["did"] == "left alone" and "RETAINED" in vm_row["why"], vm_row
        assert failing in vm_row["why"] and "only copy" in vm_row["why"], vm_row
    assert endpoint in fleet.colab("sessions").stdout
    assert not any(b["unassigned_at"] for b in fleet.billing())

    assert fleet.emu("faults", "clear", "ls").returncode == 0  # the Contents API answers again
    assert fleet.wait_terminal(job_id, timeout_s=120) is JobState.FAILED
    rec = fleet.ledger.get(job_id)
    report = json.loads(rec.get("report") or "{}")
    where = str(report["results_local"])
    assert where in rec.reason and "final upload failed" in rec.reason
    local = Path(where.split(":", 1)[1])
    beat_state = Path(beat_host(fleet)["COLABQ_STATE_DIR"])
    assert local.is_relative_to(beat_state), where  # the adopter's own host
    assert (local / "ckpt" / "model.bin").stat().st_size == 2048
    assert (local / "logs" / "exit_code").read_text().strip() == "0"
    assert report["remaining_endpoint"] is None
    assert fleet.colab("sessions").stdout.strip() == NO_SESSIONS
    hub.admin.clear_faults()
