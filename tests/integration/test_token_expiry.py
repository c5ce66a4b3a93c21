"""The runtime-proxy token expires while a job runs (the emulator's COLAB_EMU_TOKEN_LIFETIME_S,
scaled down: a 6 s token, a 2 s refresh margin, a ~30 s job). When the token an attach client
connected with expires, the proxy closes its websocket and the client hears nothing more (what
jupyter-kernel-client 0.9.0 does): colabq notices the stalled client and attaches again from the
recorded offset, with a fresh token. An exec that reaches the proxy with an expired token meets
its 401 and the CLI prunes the record of the live VM ("appears to be lost (404/401). Cleaning
up."): colabq asks the account's assignments before it believes the VM lost, writes the record
again, attaches again from the recorded offset, and the job ends SUCCEEDED with every line once
on its one session."""

from __future__ import annotations

import json

import pytest

from tests.integration.conftest import Fleet
from tests.integration.test_run_on_vm import (
    assert_clean,
    assert_each_line_once,
    client_pid,
    kill_client,
    numbered,
    submit,
    wait_for,
)
from worker.states import JobState

pytestmark = pytest.mark.integration
LIFETIME_S = 6.0
MARGIN_S = 2.0
LINES = 120
PAUSE_S = 0.25  # ~30 s: five lifetimes


@pytest.fixture
def fleet_env_extra() -> dict[str, str]:
    return {
        "COLAB_EMU_TOKEN_LIFETIME_S": str(LIFETIME_S),
        "COLAB_EMU_TOKEN_REFRESH_MARGIN_S": str(MARGIN_S),
        # The delayed attach below receives nothing for LIFETIME_S + 0.5 s: not a dropped
        # connection (a client cut off by its token's expiry is replaced after this long).
        "COLABQ_ATTACH_STALL_S": "12",
    }


def pruned(fleet: Fleet, session: str) -> bool:
    """The CLI pruned SESSION's record on a host of this fleet (its history's own event)."""
    return any(
        '"pruned"' in line
        for path in fleet.root.rglob(f"history/{session}.jsonl")
        for line in path.read_text().splitlines()
    )


def proxy_closes(fleet: Fleet) -> int:
    """Websockets the emulator's proxy closed at their token's expiry, on the worker's host."""
    logs = (fleet.root / "home").rglob("colab.log")
    return sum(p.read_text(errors="replace").count("proxy token expired") for p in logs)


def server_token(fleet: Fleet, endpoint: str) -> str:
    state = json.loads((fleet.root / "emulator" / "server.json").read_text())
    return str(state["assignments"][endpoint]["token"])


def test_tokens_expire_under_a_running_job_a_pruned_record_is_restored_and_it_succeeds(
    fleet: Fleet,
) -> None:
    job_id = submit(fleet, numbered(LINES, PAUSE_S), "--idle", "5s", wall="10m")
    wait_for(lambda: "line-4" in fleet.output(job_id), "the job running, its lines forwarded")
    endpoint = str(fleet.ledger.get(job_id).get("endpoint"))
    first_client, first_token = client_pid(fleet, job_id), server_token(fleet, endpoint)
    assert first_client is not None
    # Within a lifetime the proxy closed the first client's websocket; colabq replaced the
    # stalled client, whose successor connected with a renewed token and streams on.
    wait_for(lambda: proxy_closes(fleet) >= 1, "the proxy closing an expired connection", 30)
    wait_for(lambda: client_pid(fleet, job_id) != first_client, "the client replaced", 60)
    wait_for(lambda: server_token(fleet, endpoint) != first_token, "a renewed token", 30)
    seen = len(fleet.output(job_id))
    wait_for(lambda: len(fleet.output(job_id)) > seen + 4, "lines after the expiry", 30)
    # The next attach reaches the proxy only after its token expired: 401, record pruned.
    fault = {"delay_s": LIFETIME_S + 0.5, "times": 1}
    assert fleet.emu("faults", "set", "exec", json.dumps(fault)).returncode == 0
    kill_client(fleet, job_id)
    assert fleet.wait_terminal(job_id, timeout_s=240) is JobState.SUCCEEDED, fleet.ledger.get(
        job_id
    ).reason
    assert_each_line_once(fleet, job_id, LINES)
    texts = [ln.text for ln in fleet.ledger.read_log(job_id, count=10_000)]
    # The prune happened (the CLI's own history says so) and was not taken for a lost VM: its
    # record was written again, by colabq, or first by another CLI command of this host writing
    # back the stale copy it read before the prune (the real CLI's lost-update race), after
    # which `status` finds it and nothing is left to restore.
    assert pruned(fleet, str(fleet.ledger.get(job_id).get("session"))), texts
    assert fleet.emu("faults", "list").stdout.count('"exec"') == 0  # the delayed exec ran
    [assignment] = fleet.billing()  # one session: never restarted, never orphaned
    assert assignment["endpoint"] == endpoint and assignment["unassigned_at"] is not None
    assert_clean(fleet, job_id)
