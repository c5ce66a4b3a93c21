"""`colabq metrics`' live jobs, kept from the event log (over fakeredis), and the metric
families a scrape yields from what it read (pure)."""

from __future__ import annotations

import threading

import fakeredis
import pytest
import redis
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from tests.factories import make_spec
from worker.accounts.balances import Balance
from worker.clock import FakeClock
from worker.fleet.health import Health
from worker.metrics.ended import EndedTotals
from worker.metrics.families import Options, families
from worker.metrics.live import LiveJob, LiveJobs
from worker.metrics.scrape import Scrape, WorkerView
from worker.metrics.service import Follower
from worker.records import events
from worker.records.fleet import WorkerCard
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.spec import Gpu
from worker.states import JobState as S

T0 = 1_000.0


@pytest.fixture
def ledger() -> Ledger:
    return Ledger(fakeredis.FakeRedis(), FakeClock(T0), Keys("t"), log_maxlen=100)


def claim(ledger: Ledger, job_id: str, owner: str = "w1") -> None:
    assert ledger.claim(job_id, owner, ttl_s=30)
    ledger.transition(job_id, S.ALLOCATING, owner=owner, reason="claimed")


def test_live_jobs_are_read_once_then_kept_from_the_event_log(ledger: Ledger) -> None:
    a, _ = ledger.create(make_spec(gpu=Gpu.L4))
    b, _ = ledger.create(make_spec())
    claim(ledger, b)
    ledger.transition(b, S.FAILED, owner="w1", reason="boom")
    live = LiveJobs(ledger.r, ledger.keys)
    assert live.load() == 1 and live.snapshot()[a].state is S.QUEUED
    c, _ = ledger.create(make_spec())
    claim(ledger, a)
    # A forged entry naming no job id, and a record that is not a job's, are not kept.
    events.append(ledger.r, ledger.keys, 3600, "Not An Id", "state", "", "{}")
    d, _ = ledger.create(make_spec())
    ledger.r.hset(ledger.keys.job(d), "state", "exploded")
    while live.follow(block_ms=1):
        pass
    got = live.snapshot()
    assert {j: (v.state, v.gpu) for j, v in got.items()} == {
        a: (S.ALLOCATING, "L4"), c: (S.QUEUED, "T4"),
    }  # fmt: skip
    assert live.skipped == 2
    ledger.transition(a, S.CANCELLED, owner="w1", reason="stop")
    while live.follow(block_ms=1):
        pass
    assert set(live.snapshot()) == {c}


def scrape(**kw: object) -> Scrape:
    base: dict[str, object] = dict(
        now=T0, ended=EndedTotals(), live={}, queues={"gpu.t4": 0, "gpu.a100": 0}, workers=(),
        balances={}, janitor={}, notify={}, beats={}, skipped=0,
    )  # fmt: skip
    return Scrape(**{**base, **kw})  # type: ignore[arg-type]


def samples(s: Scrape, opts: Options) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    class One(Collector):
        def collect(self):  # type: ignore[no-untyped-def]
            return families(s, opts)

    registry = CollectorRegistry()
    registry.register(One())
    text = generate_latest(registry).decode()
    return {
        (x.name, tuple(sorted(x.labels.items()))): x.value
        for fam in text_string_to_metric_families(text)
        for x in fam.samples
    }


def card(name: str, gpus: tuple[str, ...], job: str | None = None) -> WorkerCard:
    queues = tuple(f"gpu.{g.lower()}" for g in gpus)
    return WorkerCard(name, "h", gpus, queues, job, T0, T0 - 60, "acct@example.com")


def test_a_scrapes_families_say_what_it_read() -> None:
    def job(state: S, gpu: str, created: float) -> LiveJob:
        return LiveJob(state, gpu, "acct@example.com", "alice", created)

    live = {"aaaaaaaa": job(S.QUEUED, "T4", T0 - 100), "bbbbbbbb": job(S.QUEUED, "T4", T0 - 30),
            "cccccccc": job(S.RUNNING, "A100", T0 - 500)}  # fmt: skip
    drain = Health("disk\nfull", T0 - 10, 0, True, 0.0, "ops")
    s = scrape(
        live=live, queues={"gpu.t4": 2, "gpu.a100": 0}, beats={"cccccccc": T0 - 12.5},
        workers=(WorkerView(card("w-t4", ("T4",), None), None),
                 WorkerView(card("w-a100", ("A100",), "cccccccc"), drain)),
        balances={"acct@example.com": Balance("acct@example.com", 4.5, 1.76, 1, T0 - 5, "w")},
        janitor={("acct@example.com", "orphan_stopped"): 2}, notify={("team", "failed"): 1},
    )  # fmt: skip
    got = samples(s, Options(floor_for=lambda a: 5.0))
    assert got[("colabq_queue_depth", (("gpu", "T4"),))] == 2
    assert got[("colabq_queue_oldest_wait_seconds", (("gpu", "T4"),))] == 100.0
    assert got[("colabq_queue_oldest_wait_seconds", (("gpu", "A100"),))] == 0.0
    acct = ("account", "acct@example.com")
    running = (acct, ("gpu", "A100"), ("state", "running"), ("user", "alice"))
    assert got[("colabq_jobs", running)] == 1
    assert got[("celery_queue_length", (("queue_name", "gpu.t4"),))] == 2
    assert got[("colabq_vm_heartbeat_age_seconds", (acct, ("gpu", "A100")))] == 12.5
    assert got[("celery_worker_up", (("hostname", "w-a100"),))] == 1
    assert got[("celery_worker_tasks_active", (("hostname", "w-a100"),))] == 1
    assert got[("celery_active_worker_count", (("queue_name", "gpu.a100"),))] == 0  # drained
    assert got[("celery_active_worker_count", (("queue_name", "gpu.t4"),))] == 1
    assert got[("colabq_workers", (acct, ("gpu", "A100"), ("state", "drained")))] == 1
    drained = (acct, ("hostname", "w-a100"), ("kind", "manual"), ("reason", "disk full"))
    assert got[("colabq_worker_drained", drained)] == 1
    assert got[("colabq_account_balance_units", (acct,))] == 4.5
    assert got[("colabq_account_balance_floor_units", (acct,))] == 5.0
    assert got[("colabq_janitor_actions_total", (acct, ("action", "orphan_stopped")))] == 2
    assert got[("colabq_notify_failures_total", (("state", "failed"), ("target", "team")))] == 1
    # No job id unless asked for; asked for, one series per live job.
    assert not any(dict(labels).get("job_id") for _, labels in got)
    per_job = samples(s, Options(floor_for=lambda a: 5.0, job_labels=True))
    assert {dict(lb)["job_id"] for n, lb in per_job if n == "colabq_job_info"} == set(live)


def test_the_follower_reads_every_live_job_again_after_a_failure_and_at_each_resync() -> None:
    stop, now = threading.Event(), [0.0]

    class Live:
        loads = follows = 0

        def load(self) -> int:
            self.loads += 1
            return 0

        def follow(self, block_ms: int) -> int:
            self.follows += 1
            if self.follows == 2:
                raise redis.ConnectionError("Redis went away")
            if self.follows == 3:
                now[0] += 10.0  # a resync is due
            if self.follows == 5:
                stop.set()
            return 0

    live = Live()
    Follower(live, stop, resync_s=10.0, clock=lambda: now[0], retry_s=0.0).run()  # type: ignore[arg-type]
    # The start, after the failure, at the resync; and it went on following throughout.
    assert (live.loads, live.follows) == (3, 5)
