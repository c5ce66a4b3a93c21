"""`colabq logs -f` of a queued job is never silent: stderr says which queue it waits on and how
many live workers serve it, or that none does and how to start one; then that it left the
queue, and the job's output follows on stdout. Through CliRunner on the real Redis."""

from __future__ import annotations

import threading
import time

from typer.testing import CliRunner

from producer import exitcodes
from producer.cli import app
from producer.waiting import waiting_line
from tests.factories import make_spec
from worker.records.ledger import Ledger
from worker.states import JobState

runner = CliRunner()
OWNER = "owner-token"


def test_the_waiting_line_names_the_queues_and_their_live_workers() -> None:
    line = waiting_line("j1", [("A100", "gpu.a100", 0), ("L4", "gpu.l4", 2)])
    waits = "waiting for a worker serving gpu.a100 (0 live) or gpu.l4 (2 live)"
    assert line == f"colabq: job j1 is queued: {waits}"
    none = waiting_line("j1", [("T4", "gpu.t4", 0)])
    assert "no live worker serves gpu.t4" in none and "colabq worker --gpu T4" in none


def follow_while(ledger: Ledger, env: dict[str, str | None], job_id: str, then: object) -> object:
    thread = threading.Thread(target=then)  # type: ignore[arg-type]
    thread.start()
    result = runner.invoke(app, ["logs", "-f", job_id], env=env)
    thread.join()
    return result


def test_a_queued_job_with_no_worker_for_its_gpu_says_so(
    ledger: Ledger, env: dict[str, str | None]
) -> None:
    job_id, _ = ledger.create(make_spec())

    def later() -> None:
        time.sleep(1.5)
        ledger.cancel(job_id, "test: nobody came")

    result = follow_while(ledger, env, job_id, later)
    assert result.exit_code == exitcodes.CANCELLED, result.output  # type: ignore[attr-defined]
    err = result.stderr  # type: ignore[attr-defined]
    assert f"job {job_id} is queued and no live worker serves gpu.t4" in err
    assert "colabq worker --gpu T4" in err
    assert result.stdout == ""  # type: ignore[attr-defined]


def test_a_queued_job_says_what_it_waits_for_then_follows_when_it_starts(
    ledger: Ledger, env: dict[str, str | None]
) -> None:
    job_id, _ = ledger.create(make_spec())
    ledger.r.zadd(ledger.keys.queue_workers("gpu.t4"), {"w1": time.time() + 120})

    def later() -> None:
        time.sleep(1.5)
        assert ledger.claim(job_id, OWNER, ttl_s=60)
        for state in (JobState.ALLOCATING, JobState.STARTING, JobState.RUNNING):
            ledger.transition(job_id, state, owner=OWNER, reason="test")
        ledger.append_log(job_id, "epoch 1")
        time.sleep(1.2)
        for state in (JobState.RELEASING, JobState.FAILED):
            ledger.transition(job_id, state, owner=OWNER, reason="test: exit 1")

    result = follow_while(ledger, env, job_id, later)
    assert result.exit_code == exitcodes.FAILED, result.output  # type: ignore[attr-defined]
    lines = result.stderr.splitlines()  # type: ignore[attr-defined]
    waits = "waiting for a worker serving gpu.t4 (1 live)"
    assert lines[0] == f"colabq: job {job_id} is queued: {waits}"
    assert any(f"job {job_id} left the queue" in ln for ln in lines), lines
    assert result.stdout.splitlines() == ["epoch 1"]  # type: ignore[attr-defined]
