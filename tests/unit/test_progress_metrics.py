"""`/metrics` and a run's progress: a scrape reads each held job's reading in its one pipeline
(the same round trips), always counts the running jobs projected past their time limit by GPU
and account (bounded labels), and says each job's fraction and ETA only with job labels on; a
damaged reading counts as none. `promtool check metrics` on a scrape with job labels."""

from __future__ import annotations

import shutil
import subprocess

import fakeredis
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import service_missing
from tests.factories import make_spec
from worker.clock import FakeClock
from worker.metrics.families import Options
from worker.metrics.live import LiveJobs
from worker.metrics.service import LedgerCollector
from worker.progress import record
from worker.progress.record import Reading
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.spec import Gpu
from worker.states import JobState as S

NOW = 1_800_000_000.0


def running(ledger: Ledger, gpu: Gpu, account: str) -> str:
    job_id, _ = ledger.create(make_spec(gpu=gpu))
    assert ledger.claim(job_id, "w", ttl_s=60)
    ledger.transition(job_id, S.ALLOCATING, owner="w", reason="claimed")
    ledger.set_fields(job_id, owner="w", endpoint=f"gpu-{job_id}", account=account)
    for st in (S.STARTING, S.RUNNING):
        ledger.transition(job_id, st, owner="w", reason=st.value)
    return job_id


def with_progress(ledger: Ledger, job_id: str, done: float, rate: float, raw: str = "") -> None:
    r = Reading(NOW - 5, done, 100.0, "it", "tqdm", rate, 900.0, NOW - 3600, 0.0)
    ledger.record_watch(job_id, {
        "heartbeat_at": repr(NOW), record.FIELD: raw or record.encode(r),
        "exec_started": repr(NOW - 3600), "exec_ttl": repr(2 * 3600.0),
    })  # fmt: skip


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape_text(ledger: Ledger, job_labels: bool) -> str:
    live = LiveJobs(ledger.r, ledger.keys)
    live.load()
    collector = LedgerCollector(ledger.r, ledger.keys, live,
                                Options(floor_for=lambda a: 0.0, job_labels=job_labels), "",
                                lambda: NOW)  # fmt: skip
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry).decode()


def scrape(ledger: Ledger, job_labels: bool) -> Samples:
    text = scrape_text(ledger, job_labels)
    return {
        (x.name, tuple(sorted(x.labels.items()))): x.value
        for fam in text_string_to_metric_families(text)
        for x in fam.samples
    }


@pytest.fixture
def ledger() -> Ledger:
    return Ledger(fakeredis.FakeRedis(), FakeClock(NOW), Keys("t"), log_maxlen=100)


def test_overruns_are_counted_and_per_job_progress_needs_job_labels(ledger: Ledger) -> None:
    # 1 h in, a 2 h limit: 10 % at 10/3600 it/s ends 9 h after the limit; 80 % ends in time.
    late_a = running(ledger, Gpu.T4, "a@x")
    late_b = running(ledger, Gpu.T4, "a@x")
    fine = running(ledger, Gpu.A100, "b@x")
    damaged = running(ledger, Gpu.A100, "b@x")
    for job_id in (late_a, late_b):
        with_progress(ledger, job_id, 10, 10 / 3600)
    with_progress(ledger, fine, 80, 80 / 3600)
    with_progress(ledger, damaged, 0, 0, raw='{"v": 1, "done": "lots"}')
    got = scrape(ledger, job_labels=False)
    overrun = {k: v for k, v in got.items() if k[0] == "colabq_jobs_projected_overrun"}
    assert overrun == {("colabq_jobs_projected_overrun", (("account", "a@x"), ("gpu", "T4"))): 2.0}
    assert not [k for k in got if k[0].startswith("colabq_job_progress")]
    assert not [k for k in got if any(name == "job_id" for name, _ in k[1])]
    labelled = scrape(ledger, job_labels=True)
    assert labelled[("colabq_job_progress_ratio", (("job_id", fine),))] == 0.8
    eta = labelled[("colabq_job_eta_timestamp_seconds", (("job_id", late_a),))]
    assert eta == pytest.approx(NOW - 5 + 90 / (10 / 3600), abs=0.01)
    assert ("colabq_job_progress_ratio", (("job_id", damaged),)) not in labelled


def test_promtool_lints_a_scrape_with_progress(ledger: Ledger) -> None:
    exe = shutil.which("promtool")
    if exe is None:
        service_missing("promtool is needed: run ops/ensure-promtool.sh (Debian's prometheus)")
    job_id = running(ledger, Gpu.T4, "a@x")
    with_progress(ledger, job_id, 10, 10 / 3600)
    res = subprocess.run([exe, "check", "metrics"], input=scrape_text(ledger, job_labels=True),
                         capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    problems = [ln for ln in (res.stdout + res.stderr).splitlines() if "progress" in ln
                or "overrun" in ln or "eta" in ln]  # fmt: skip
    assert problems == []
