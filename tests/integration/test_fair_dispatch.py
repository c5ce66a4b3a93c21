"""Fair dispatch: no worker reserves a job it cannot start now. A busy worker leaves the next
message in the queue (with prefetch it would take it, and the job would wait there for hours
while another worker sits idle); a worker that is free takes it at once."""

from __future__ import annotations

import time

import pytest
import redis
from typer.testing import CliRunner

from producer.cli import app
from tests.integration.conftest import Fleet, start_worker, stop_worker
from tests.integration.test_run_on_vm import submit, wait_for
from worker.spec import Gpu, queue_for
from worker.states import JobState

pytestmark = pytest.mark.integration
runner = CliRunner()


def test_a_busy_worker_leaves_the_next_job_to_an_idle_one(fleet: Fleet) -> None:
    client = redis.Redis.from_url(fleet.env["COLABQ_REDIS_URL"])
    queue = queue_for(Gpu.T4, fleet.env["COLABQ_QUEUE_PREFIX"])
    # Long enough to outlast a second worker's start on a loaded host; cancelled at the end.
    first_job = submit(fleet, "sleep 300\necho first\n")
    wait_for(lambda: fleet.ledger.get(first_job).state is JobState.RUNNING, "job 1 running")
    second_job = submit(fleet, "echo second\n", "--name", "mnist-mlp-bs64-lr1e-3-second")
    time.sleep(3)  # the busy worker polls the queue many times meanwhile
    assert client.llen(queue) == 1, "the busy worker took the next job's message"
    assert fleet.ledger.get(second_job).state is JobState.QUEUED
    second = start_worker(fleet.env, fleet.root / "worker2.log")
    try:
        wait_for(
            lambda: fleet.ledger.get(second_job).state is not JobState.QUEUED,
            "job 2 taken by the new worker", timeout_s=15,
        )  # fmt: skip
        assert fleet.ledger.get(first_job).state is JobState.RUNNING  # job 2 did not wait for it
        assert fleet.ledger.get(first_job).owner != fleet.ledger.get(second_job).owner
        assert fleet.wait_terminal(second_job) is JobState.SUCCEEDED
        assert fleet.ledger.get(first_job).state is JobState.RUNNING
        runner.invoke(app, ["cancel", first_job], env=fleet.env)
        assert fleet.wait_terminal(first_job) is JobState.CANCELLED
    finally:
        stop_worker(second)


def test_two_workers_two_long_jobs_back_to_back_both_run_at_once(fleet: Fleet) -> None:
    second = start_worker(fleet.env, fleet.root / "worker2.log")
    try:
        t0 = time.monotonic()
        jobs = [
            submit(fleet, "sleep 60\n", "--name", f"mnist-mlp-bs64-lr1e-3-long{i}") for i in (1, 2)
        ]
        wait_for(
            lambda: all(fleet.ledger.get(j).state is JobState.RUNNING for j in jobs),
            "both jobs RUNNING", timeout_s=20,
        )  # fmt: skip
        print(f"both RUNNING {time.monotonic() - t0:.1f} s after the first submit")
        assert len({fleet.ledger.get(j).owner for j in jobs}) == 2
        for j in jobs:
            runner.invoke(app, ["cancel", j], env=fleet.env)
        for j in jobs:
            assert fleet.wait_terminal(j) is JobState.CANCELLED
    finally:
        stop_worker(second)
