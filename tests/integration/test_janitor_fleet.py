"""The janitor against a real worker, the emulated account and the real Redis: a lost host's job
is adopted and finished, colabq's orphan assignment is stopped while the account's other
assignments are never touched, and a QUEUED job whose message was lost is sent again, once."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import redis

from tests.integration.conftest import Fleet
from tests.integration.test_run_on_vm import (
    NO_SESSIONS,
    assert_each_line_once,
    endpoint_of,
    numbered,
    submit,
    wait_for,
)
from worker.janitor.wiring import waiting_job_ids
from worker.spec import Gpu, queue_for
from worker.states import JobState

pytestmark = pytest.mark.integration


@pytest.fixture
def fleet_env_extra() -> dict[str, str]:
    # The VM would release itself 30 s after its job if nobody stopped it; here nobody but
    # colabq's own processes may stop anything.
    return {"COLABQ_RELEASE_HOLD_S": "600", "COLABQ_RELEASE_ATTEMPTS": "2",
            "COLABQ_RELEASE_BACKOFF_S": "0.2"}  # fmt: skip


@pytest.fixture
def adopters() -> Iterator[list[int]]:
    """Adopter processes a janitor pass started (their own sessions): ended with the test."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def janitor(env: dict[str, str], *extra: str) -> dict[str, object]:
    res = subprocess.run(
        [sys.executable, "-m", "producer.cli", "janitor", "--act", "--json", *extra],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    return dict(json.loads(res.stdout))


def rows(report: dict[str, object], subject: str) -> list[dict[str, str]]:
    return [r for r in report["rows"] if r["subject"] == subject]  # type: ignore[attr-defined]


def beat_host(fleet: Fleet, **settings: str) -> dict[str, str]:
    """The janitor's host: another machine with the account's credentials and the settings."""
    return {**fleet.other_host("beat"), **{f"COLABQ_{k.upper()}": v for k, v in settings.items()}}


def adopt_row(
    fleet: Fleet, job_id: str, adopters: list[int], timeout_s: float = 90
) -> dict[str, str]:
    """Janitor passes (as beat runs them) until one adopts `job_id`; its row. The passes before
    it must leave the job alone."""
    deadline = time.monotonic() + timeout_s
    while True:
        report = janitor(beat_host(fleet))
        found = rows(report, job_id)
        adopted = [r for r in found if r["did"].startswith("did: adopt")]
        if adopted:
            adopters.append(int(adopted[0]["did"].split("pid ")[1].rstrip(")")))
            return adopted[0]
        assert all(r["did"] == "left alone" for r in found), found
        assert time.monotonic() < deadline, f"never adopted: {found}"


def test_host_lost_the_janitor_adopts_the_job_and_releases_soon_after_it_ends(
    fleet: Fleet, adopters: list[int]
) -> None:
    n = 80
    ended = fleet.share() / "ended-at"  # the job's (unprivileged) user writes it
    stamp = f"python3 -c 'import time; print(time.time())' > {ended}\n"
    job_id = submit(fleet, numbered(n, pause_s=0.1, then=stamp))
    wait_for(lambda: "line-10" in fleet.output(job_id), "line-10 forwarded")
    fleet.lose_host()
    lost_at = time.monotonic()
    # Passes until one adopts it: its lease (3 s here) expires and its watchdog misses its
    # beats (3 polls of 0.5 s + margin, the 10 s floor here), thresholds the janitor derives.
    row = adopt_row(fleet, job_id, adopters)
    noticed_s = time.monotonic() - lost_at
    print(f"host loss noticed and adopted {noticed_s:.1f} s after the host was lost")
    assert row["why"].startswith("owner and watchdog gone"), row
    again = janitor(beat_host(fleet))  # one adopter, however many passes
    assert not any(r["did"].startswith("did: adopt") for r in rows(again, job_id)), again
    assert fleet.wait_terminal(job_id, timeout_s=120) is JobState.SUCCEEDED
    rec = fleet.ledger.get(job_id)
    assert rec.get("exit_code") == "0"
    assert json.loads(rec.get("report") or "{}")["outcome"] == "succeeded"
    assert_each_line_once(fleet, job_id, n)
    [assignment] = fleet.billing()
    held_after_end = float(assignment["unassigned_at"]) - float(ended.read_text())  # type: ignore[arg-type]
    print(f"P2 host loss: session released {held_after_end:.1f} s after the job ended on the VM")
    assert 0 < held_after_end <= 60
    assert fleet.colab("sessions").stdout.strip() == NO_SESSIONS


def test_colabqs_orphan_is_stopped_and_the_accounts_other_assignments_never(fleet: Fleet) -> None:
    # The user's own notebook session (a record in their own CLI folder) and an assignment no
    # record names (`[?]`: another tool, a `colab new` killed before it wrote its state).
    notebook = fleet.root / "my-notebooks.json"
    made = fleet.run_colab("--config", str(notebook), "new", "-s", "my-notebook", "--gpu", "T4")
    assert made.returncode == 0, made.stdout + made.stderr
    foreign = json.loads(notebook.read_text())["my-notebook"]["endpoint"]
    unknown = fleet.emu("orphan", "--gpu", "T4").stdout.strip()
    assert unknown.startswith("gpu-")
    # A job whose every stop fails: it ends with its VM still assigned; then its host is lost,
    # so no watchdog will try again.
    assert fleet.emu("faults", "set", "stop", '{"http": 503}').returncode == 0
    job_id = submit(fleet, "echo trained\n")
    endpoint = endpoint_of(fleet, job_id)
    fleet.wait_terminal(job_id, timeout_s=120)
    fleet.lose_host()
    assert fleet.emu("faults", "clear", "stop").returncode == 0
    assert endpoint in fleet.colab("sessions").stdout

    # Passes 1 s apart with a 1.5 s grace: one and a half intervals, as by default (60 s, 90 s).
    env = beat_host(fleet, orphan_grace_s="1.5")
    passes = []
    for _ in range(10):
        started = time.monotonic()
        passes.append(janitor(env))
        time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
    stopped_at = [i for i, p in enumerate(passes) if any(
        r["did"].startswith("did: stop orphan") for r in rows(p, endpoint))]  # fmt: skip
    seen = [rows(p, endpoint) for p in passes]
    assert len(stopped_at) == 1 and stopped_at[0] <= 2, seen  # within 3 passes, once
    for p in passes:
        for other in (foreign, unknown):
            [row] = rows(p, other)
            assert row["did"] == "left alone" and "no colabq record" in row["why"], row
    listed = fleet.colab("sessions").stdout
    assert endpoint not in listed and foreign in listed and unknown in listed
    billed = {str(b["endpoint"]): b for b in fleet.billing()}
    assert billed[endpoint]["unassigned_at"] is not None
    assert billed[foreign]["unassigned_at"] is None and billed[unknown]["unassigned_at"] is None
    assert json.loads(notebook.read_text())["my-notebook"]["endpoint"] == foreign


def test_a_queued_job_whose_message_was_lost_is_sent_again_once(fleet: Fleet) -> None:
    # No worker serves A100 here, so the message stays where the test can see it.
    job_id = submit(fleet, "echo hi\n", "--gpu", "A100")
    prefix = fleet.env["COLABQ_QUEUE_PREFIX"]
    client = redis.Redis.from_url(fleet.env["COLABQ_REDIS_URL"])
    queue = queue_for(Gpu.A100, prefix)
    assert waiting_job_ids(fleet.ledger, prefix) == {job_id}
    env = beat_host(fleet, stranded_grace_s="0")
    left = janitor(env)
    assert not rows(left, job_id), left  # its message waits its turn: nothing to do
    client.delete(queue)  # the message is lost
    first = janitor(env)
    [row] = rows(first, job_id)
    assert row["did"].startswith("did: send again"), row
    assert waiting_job_ids(fleet.ledger, prefix) == {job_id}
    client.delete(queue)
    second = janitor(env)
    [row] = rows(second, job_id)
    assert row["did"] == "left alone" and "sent again" in row["why"], row
    assert waiting_job_ids(fleet.ledger, prefix) == set()
    assert fleet.ledger.get(job_id).state is JobState.QUEUED


def test_host_lost_while_starting_the_janitor_adopts_and_releases_soon_after_the_end(
    fleet: Fleet, adopters: list[int]
) -> None:
    ended = fleet.share() / "ended-at"  # the job's (unprivileged) user writes it
    stamp = f"python3 -c 'import time; print(time.time())' > {ended}\n"
    # The bundle's upload hangs a while: the host is lost in STARTING, mid-upload.
    assert (
        fleet.emu("faults", "set", "upload", json.dumps({"delay_s": 30, "times": 1})).returncode
        == 0
    )
    job_id = submit(fleet, "echo hello\n" + stamp)
    fleet.wait_state(job_id, JobState.STARTING)
    fleet.lose_host()
    row = adopt_row(fleet, job_id, adopters)
    assert row["seen"] == "STARTING", row
    assert fleet.wait_terminal(job_id, timeout_s=120) is JobState.SUCCEEDED
    assert "hello" in fleet.output(job_id)
    [assignment] = fleet.billing()
    held_after_end = float(assignment["unassigned_at"]) - float(ended.read_text())  # type: ignore[arg-type]
    assert 0 < held_after_end <= 60
    assert fleet.colab("sessions").stdout.strip() == NO_SESSIONS
