"""Every line of the VM's console in `colabq logs`, exactly once, whatever the proxy token does
(issue 25). The emulator's tokens live 4 s here: the proxy closes an attached exec's websocket
when its token expires, and the client then hears nothing more until its deadline (what
jupyter-kernel-client 0.9.0 does, `ops/colab_emulator/tokens.py`). The job prints its last lines
only once the attach client's token has expired: that client never streams them.

- `stalled`: the VM waits for its owner (the release hold): the owner notices the stalled client
  and attaches again from the recorded offset with a fresh token.
- `killed`: the same, and the attach client is SIGKILLed once the wrapper on the VM is done.
- `self-released`: the wrapper releases the VM itself right after its final upload (hold 0): the
  tail can only come from the console log that upload stored.
- the same with the owner dead: the janitor forwards the tail from the store before it settles.

`COLABQ_LAST_LINES_RUNS` (default 1) runs each case that many times in a row on one worker:
`bash ops/chaos/last_lines.sh` runs 20.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

import pytest

from tests.integration.conftest import Fleet
from tests.integration.test_janitor_fleet import beat_host, janitor, rows
from tests.integration.test_run_on_vm import (
    NO_SESSIONS,
    assert_clean,
    assert_each_line_once,
    endpoint_of,
    kill_client,
    submit,
    wait_for,
)
from worker.states import JobState

pytestmark = pytest.mark.integration
LIFETIME_S = 4.0
MARGIN_S = 1.0
LINES = 40
TAIL = 2  # printed after the attach client's token expired
RUNS = int(os.environ.get("COLABQ_LAST_LINES_RUNS", "1"))
CLOSED = "closed by the proxy: proxy token expired"
FROM_STORE = "came from the console log its final upload stored"


# The VM releases itself right after its final upload, and the stalled client is not replaced
# before that (so the tail has only the store to come from).
SELF_RELEASE = {"COLABQ_RELEASE_HOLD_S": "0", "COLABQ_ATTACH_STALL_S": "30"}


@pytest.fixture
def fleet_env_extra(request: pytest.FixtureRequest) -> dict[str, str]:
    return {
        "COLAB_EMU_TOKEN_LIFETIME_S": str(LIFETIME_S),
        "COLAB_EMU_TOKEN_REFRESH_MARGIN_S": str(MARGIN_S),
        "COLABQ_RELEASE_HOLD_S": "30",
        **getattr(request, "param", {}),
    }


def gated_job(gate: Path) -> str:
    """line-1 .. line-38 at once, then the last two once `gate` exists."""
    head = LINES - TAIL
    return (
        f'for i in $(seq 1 {head}); do echo "line-$i"; sleep 0.02; done\n'
        f"while [ ! -e {gate} ]; do sleep 0.05; done\n"
        f'for i in $(seq {head + 1} {LINES}); do echo "line-$i"; done\n'
    )


def proxy_closes(fleet: Fleet) -> int:
    """Websockets the emulator's proxy closed at their token's expiry, on the worker's host."""
    logs = (fleet.root / "home").rglob("colab.log")
    return sum(path.read_text(errors="replace").count(CLOSED) for path in logs)


def console_done(fleet: Fleet, job_id: str, endpoint: str) -> bool:
    """The wrapper on the VM printed its end (DONE, after the final upload)."""
    run = fleet.root / "emulator" / "vms" / endpoint / "root" / "content" / "colab-jobs"
    try:
        text = (run / job_id / "run" / "console.log").read_text(errors="replace")
    except OSError:
        return False
    return "_DONE__=" in text


def colabq_lines(fleet: Fleet, job_id: str) -> list[str]:
    return [ln.text for ln in fleet.ledger.read_log(job_id, count=10_000) if ln.stream != "out"]


def run_once(fleet: Fleet, how: str) -> None:
    started = time.monotonic()
    gate = fleet.share() / f"gate-{secrets.token_hex(4)}"
    job_id = submit(fleet, gated_job(gate), wall="10m")
    endpoint = endpoint_of(fleet, job_id)
    wait_for(lambda: f"line-{LINES - TAIL}" in fleet.output(job_id), "the head forwarded")
    # The client that forwarded the head connected less than a token's lifetime ago, and the
    # job's console stays quiet meanwhile (nothing to notice it by): once a lifetime has
    # passed, its websocket is closed.
    time.sleep(LIFETIME_S + 0.5)
    assert proxy_closes(fleet) >= 1
    gate.touch()
    if how == "killed":
        wait_for(lambda: console_done(fleet, job_id, endpoint), "the wrapper done on the VM")
        kill_client(fleet, job_id)
    state = fleet.wait_terminal(job_id, timeout_s=120)
    assert state is JobState.SUCCEEDED, fleet.ledger.get(job_id).reason
    assert_each_line_once(fleet, job_id, LINES)
    said = colabq_lines(fleet, job_id)
    if how == "stalled":  # the VM waits for its owner, who replaced the stalled client
        assert any("its connection is gone; attaching again" in line for line in said), said
    if how == "self-released":
        assert any(FROM_STORE in line for line in said), said
    wait_for(lambda: fleet.exec_processes(job_id) == [], "no exec of the job left", 30)
    assert_clean(fleet, job_id)
    took = time.monotonic() - started
    print(f"{how}: {job_id} SUCCEEDED, {LINES} lines once, in {took:.1f}s", flush=True)


def run_all(fleet: Fleet, how: str) -> None:
    for k in range(RUNS):
        try:
            run_once(fleet, how)
        except AssertionError as exc:
            exc.add_note(f"run {k + 1} of {RUNS}")
            raise
    print(f"{how}: {RUNS} of {RUNS} runs in a row", flush=True)


def test_token_expired_at_the_last_lines_every_line_once(fleet: Fleet) -> None:
    run_all(fleet, "stalled")


def test_token_expired_and_client_killed_at_the_end_every_line_once(fleet: Fleet) -> None:
    run_all(fleet, "killed")


@pytest.mark.parametrize("fleet_env_extra", [SELF_RELEASE], indirect=True, ids=["hold 0"])
def test_vm_self_released_after_its_final_upload_the_tail_comes_from_the_store(
    fleet: Fleet,
) -> None:
    run_all(fleet, "self-released")


@pytest.mark.parametrize("fleet_env_extra", [SELF_RELEASE], indirect=True, ids=["hold 0"])
def test_owner_dead_vm_self_released_the_janitor_settles_with_the_tail(fleet: Fleet) -> None:
    """The worker dies (its watchdog lives on) with the attach client's token expired; the VM
    releases itself after the final upload; the watchdog verifies it gone; the janitor, on
    another host, forwards the tail from the store before it settles the job."""
    gate = fleet.share() / f"gate-{secrets.token_hex(4)}"
    job_id = submit(fleet, gated_job(gate), wall="10m")
    wait_for(lambda: f"line-{LINES - TAIL}" in fleet.output(job_id), "the head forwarded")
    time.sleep(LIFETIME_S + 0.5)
    fleet.kill_worker()
    kill_client(fleet, job_id)
    gate.touch()
    wait_for(lambda: fleet.ledger.read_watch(job_id).get("gone_verified_at"), "gone, verified")
    time.sleep(4)  # the lease (3 s here) expires
    report = janitor(beat_host(fleet))
    [row] = [r for r in rows(report, job_id) if r["did"].startswith("did: settle")]
    assert row["did"] == "did: settle SUCCEEDED" and FROM_STORE in row["why"], row
    assert fleet.ledger.get(job_id).state is JobState.SUCCEEDED
    assert_each_line_once(fleet, job_id, LINES)
    assert any(FROM_STORE in line for line in colabq_lines(fleet, job_id))
    assert fleet.colab("sessions").stdout.strip() == NO_SESSIONS
