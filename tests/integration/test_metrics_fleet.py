"""`colabq metrics` scraped over HTTP while a real fleet runs 3 jobs on 2 GPU types (a T4 worker
and an A100 worker on the emulator, the real Redis): mid-run, the live counts, queue depth and
length, oldest wait, workers and heartbeats equal what `status` and `workers` say; after the
end, the ended counts, GPU-seconds and compute units equal `status` and the final reports (and
`usage`), and the wait and run histograms equal the jobs' histories."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from producer.broker import free_port
from producer.cli import app
from tests.integration.conftest import Fleet, start_worker, stop_worker
from tests.integration.test_run_on_vm import submit, wait_for
from worker.states import TERMINAL, JobState

pytestmark = pytest.mark.integration
runner = CliRunner()
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def metrics_url(fleet: Fleet) -> Iterator[str]:
    port = free_port()
    log = fleet.root / "metrics.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "producer.cli", "metrics", "--port", str(port)],
            env=fleet.env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_for(lambda: b"serving" in log.read_bytes(), "colabq metrics serving", 60)
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def by(samples: Samples, name: str, *keys: str) -> dict[tuple[str, ...], float]:
    """`name`'s samples summed by the label values `keys`, zeros left out."""
    out: Counter[tuple[str, ...]] = Counter()
    for (n, labels), v in samples.items():
        if n == name and v:
            d = dict(labels)
            out[tuple(d[k] for k in keys)] += v
    return dict(out)


def cli_json(fleet: Fleet, *args: str) -> Any:
    res = runner.invoke(app, [*args, "--json"], env=fleet.env)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def counted(rows: list[dict[str, Any]], live: bool) -> dict[tuple[str, ...], float]:
    states = {s.value for s in JobState if (s not in TERMINAL) is live}
    got = Counter((r["state"], r["gpu"]) for r in rows if r["state"] in states)
    return {k: float(n) for k, n in got.items()}


def claim_at(history: list[dict[str, Any]]) -> float:
    """When the claim that started the job's last run happened (after QUEUED)."""
    states = [h for h in history if not h.get("action")]
    return max(b["at"] for a, b in itertools.pairwise(states)
               if a["state"] == "queued" and b["state"] == "allocating")  # fmt: skip


def test_a_scrape_during_and_after_three_jobs_on_two_gpu_types_equals_status_and_reports(
    fleet: Fleet, metrics_url: str
) -> None:
    env = {**fleet.env, "COLABQ_WORKER_GPUS": "A100"}
    a100 = start_worker(env, fleet.root / "worker-a100.log", gpu="A100")
    gate = fleet.share() / "go"
    hold = f"while [ ! -f {gate} ]; do sleep 0.1; done\necho released\n"
    try:
        t4_first = submit(fleet, hold, "--name", "mnist-mlp-metrics-t4a")
        wait_for(lambda: fleet.ledger.state_of(t4_first) is JobState.RUNNING, "T4 job running")
        t4_second = submit(fleet, "echo second\n", "--name", "mnist-mlp-metrics-t4b")
        on_a100 = submit(fleet, hold, "--name", "mnist-mlp-metrics-a100", "--gpu", "A100")
        wait_for(lambda: fleet.ledger.state_of(on_a100) is JobState.RUNNING, "A100 job running",
                 timeout_s=120)  # fmt: skip
        jobs = [t4_first, t4_second, on_a100]
        rows = cli_json(fleet, "status")
        # The follower sees the last change within a poll; then the scrape equals `status`.
        wait_for(lambda: by(scrape(metrics_url), "colabq_jobs", "state", "gpu") ==
                 counted(rows, live=True), "the live counts equal status", 30)  # fmt: skip
        assert counted(rows, live=True) == {("running", "T4"): 1, ("queued", "T4"): 1,
                                            ("running", "A100"): 1}  # fmt: skip
        # The workers' cards say what they hold at their next beat (every 5 s).
        wait_for(lambda: [w["busy"] for w in cli_json(fleet, "workers")] == [True, True],
                 "both workers' cards say busy", 30)  # fmt: skip
        mid = scrape(metrics_url)
        prefix = fleet.env["COLABQ_QUEUE_PREFIX"]
        assert by(mid, "colabq_queue_depth", "gpu") == {("T4",): 1}
        assert by(mid, "celery_queue_length", "queue_name") == {(f"{prefix}gpu.t4",): 1}
        second = fleet.ledger.get(t4_second)
        oldest = mid[("colabq_queue_oldest_wait_seconds", (("gpu", "T4"),))]
        assert 0 < oldest <= time.time() - second.created_at
        workers = {w["name"]: w for w in cli_json(fleet, "workers")}
        assert by(mid, "celery_worker_up", "hostname") == {(n,): 1 for n in workers}
        assert by(mid, "celery_worker_tasks_active", "hostname") == {(n,): 1 for n in workers}
        assert by(mid, "colabq_workers", "gpu", "state") == {("T4", "busy"): 1,
                                                            ("A100", "busy"): 1}  # fmt: skip
        beats = by(mid, "colabq_vm_heartbeat_age_seconds", "gpu")
        assert set(beats) == {("T4",), ("A100",)} and all(v < 60 for v in beats.values())
        assert not any(dict(labels).get("job_id") for _, labels in mid)  # not asked for

        gate.touch()
        for job_id in jobs:
            assert fleet.wait_terminal(job_id, timeout_s=240) is JobState.SUCCEEDED
        ended = cli_json(fleet, "status")
        wait_for(lambda: not by(scrape(metrics_url), "colabq_jobs", "state"), "no live job", 30)
        after = scrape(metrics_url)
        assert by(after, "colabq_jobs_ended_total", "state", "gpu") == counted(ended, live=False)
        assert counted(ended, live=False) == {("succeeded", "T4"): 2, ("succeeded", "A100"): 1}
        details = {j: cli_json(fleet, "status", j) for j in jobs}
        reports = {j: json.loads(fleet.ledger.get(j).get("report") or "{}") for j in jobs}
        held: Counter[tuple[str, ...]] = Counter()
        units: Counter[tuple[str, ...]] = Counter()
        for j, d in details.items():
            who = (d["gpu"], d["account"] or "none", d["user"])
            held[who] += reports[j]["duration"]["held_s"]
            units[who] += reports[j]["compute_units"]["units"]
        got_held = by(after, "colabq_gpu_held_seconds_total", "gpu", "account", "user")
        got_units = by(after, "colabq_compute_units_total", "gpu", "account", "user")
        assert got_held == pytest.approx(dict(held)) and got_units == pytest.approx(dict(units))
        usage = cli_json(fleet, "usage", "--by", "gpu")
        assert sum(got_units.values()) == pytest.approx(usage["total"]["units"], abs=0.005)
        for gpu in ("T4", "A100"):
            mine = [d for d in details.values() if d["gpu"] == gpu]
            waits = [claim_at(d["history"]) - d["history"][0]["at"] for d in mine]
            runs = [d["history"][-1]["at"] - claim_at(d["history"]) for d in mine]
            g = (("gpu", gpu),)
            assert after[("colabq_job_wait_seconds_count", g)] == len(mine)
            assert after[("colabq_job_wait_seconds_sum", g)] == pytest.approx(sum(waits), abs=1e-4)
            assert after[("colabq_job_run_seconds_sum", g)] == pytest.approx(sum(runs), abs=1e-4)
            inf = (("gpu", gpu), ("le", "+Inf"))
            assert after[("colabq_job_run_seconds_bucket", inf)] == len(mine)
        assert after[("colabq_ledger_up", ())] == 1 and after[("colabq_metrics_skipped", ())] == 0
    finally:
        gate.touch()
        stop_worker(a100)
