"""A 12-point sweep with `--max-parallel 2` on 4 workers (issue 21): never more than 2 of its
points running at once, fleet-wide (sampled as it runs, and proved after from the points'
histories: no instant holds more than 2 between a claim and an end), and all 12 end."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from typer.testing import CliRunner

from producer.cli import app
from tests.integration.conftest import Fleet, start_worker, stop_worker
from tests.integration.test_run_on_vm import RUN, WAIVE, wait_for
from worker.flow.sweeps import sweep_running
from worker.states import TERMINAL, JobState

pytestmark = pytest.mark.integration
runner = CliRunner()


def test_max_parallel_caps_a_sweep_fleet_wide(fleet: Fleet) -> None:
    with ThreadPoolExecutor(3) as pool:  # started side by side: each takes seconds
        others = list(
            pool.map(lambda i: start_worker(fleet.env, fleet.root / f"w{i}.log"), (2, 3, 4))
        )
    try:
        script = fleet.root / "job.sh"
        script.write_text("echo point $I\n")
        result = runner.invoke(
            app,
            ["submit", str(script), "--name", RUN + "-{env.I}", "--idle", "5s",
             "--local-store", str(fleet.root / "store"), "--json", *WAIVE,
             "--sweep", "env.I=" + ",".join(str(i) for i in range(12)), "--max-parallel", "2"],
            env=fleet.env,
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        ids, sweep = [j["job_id"] for j in doc["jobs"]], doc["sweep"]
        assert len(ids) == 12 and sweep
        running = sweep_running(fleet.ledger.keys, sweep)
        most, deadline = 0, time.monotonic() + 120
        while time.monotonic() < deadline:
            states = [fleet.ledger.state_of(j) for j in ids]
            now_busy = sum(s is not JobState.QUEUED and s not in TERMINAL for s in states)
            most = max(most, now_busy, int(fleet.ledger.r.scard(running)))
            assert now_busy <= 2 and fleet.ledger.r.scard(running) <= 2, states
            if all(s in TERMINAL for s in states):
                break
            time.sleep(0.2)
        assert [fleet.ledger.state_of(j) for j in ids] == [JobState.SUCCEEDED] * 12
        assert most == 2  # the cap was reached, not merely never approached
        # From the records: each point runs from its claim (ALLOCATING) to its end.
        spans = []
        for j in ids:
            hist = fleet.ledger.history(j)
            start = next(h.at for h in hist if h.state is JobState.ALLOCATING)
            spans.append((start, hist[-1].at))
        edges = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
        level = peak = 0
        for _, step in edges:
            level += step
            peak = max(peak, level)
        assert peak <= 2
        assert len({fleet.ledger.get(j).get("worker") for j in ids}) > 2  # the fleet shared them
        wait_for(lambda: fleet.ledger.r.scard(running) == 0, "every slot given back", 5)
    finally:
        for proc in others:
            stop_worker(proc)
