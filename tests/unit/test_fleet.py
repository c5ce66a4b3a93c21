"""The fleet survives its members, as plain logic on fakeredis: failures classed by cause, a job
given back untouched (and poison once several workers gave it back), capacity waits with capped
backoff, the worker's drain and probes, and the task's choices before a claim."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fakeredis
import pytest

from tests.factories import make_spec
from worker import tasks
from worker.clock import FakeClock
from worker.errors import (
    AcceleratorRejected,
    AllocationRefused,
    ColabNotAuthenticated,
    ColabVersionMismatch,
    HubAuthError,
    HubNotFound,
    HubRepoNotPrivate,
    HubUnavailable,
    SecretFileError,
    SpecError,
    StaleOwner,
)
from worker.fleet import health
from worker.fleet.capacity import backoff_s, plan_wait, waiting_line
from worker.fleet.causes import Cause, GpuMismatch, cause_of
from worker.fleet.hooks import FleetHooks
from worker.fleet.prober import Prober
from worker.fleet.putback import Attempt, give_back_host, poison_reason, promote_due, put_back
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.settings import Settings
from worker.spec import encode_spec
from worker.states import JobState as S


@pytest.fixture
def ledger() -> Ledger:
    return Ledger(fakeredis.FakeRedis(), FakeClock(1000.0), Keys("t"), log_maxlen=1000)


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        (AllocationRefused("412"), Cause.CAPACITY),
        (AcceleratorRejected("400"), Cause.CAPACITY),
        (GpuMismatch("A100", "NVIDIA L4"), Cause.CAPACITY),
        (ColabNotAuthenticated("401"), Cause.HOST),
        (ColabVersionMismatch("0.7.5"), Cause.HOST),
        (SecretFileError("mode 0644"), Cause.HOST),
        (HubUnavailable("commit", 3, 503, "down"), Cause.HOST),
        (HubAuthError("a/b", 401, "bad token"), Cause.HOST),
        (NotADirectoryError(20, "Not a directory"), Cause.HOST),
        # The job's own: its destination, its inputs, its script.
        (HubAuthError("a/b", 403, "foreign namespace"), Cause.JOB),
        (HubRepoNotPrivate("a/b", "model"), Cause.JOB),  # a PermissionError, still the job's
        (HubNotFound("hf://a/b/ckpt"), Cause.JOB),
        (SpecError("script", "bash -n failed"), Cause.JOB),
        (ValueError("anything else"), Cause.JOB),
    ],
)
def test_every_failure_has_one_cause(error: BaseException, cause: Cause) -> None:
    assert cause_of(error) is cause


def test_backoff_doubles_and_is_capped() -> None:
    assert [backoff_s(n, 30, 600) for n in (1, 2, 3, 4, 5, 6)] == [30, 60, 120, 240, 480, 600]


def test_a_capacity_wait_retries_until_its_deadline_then_gives_up() -> None:
    first = plan_wait(gpus="T4", refusals_before=0, since=None, now=100.0, wait_s=300,
                      base_s=30, cap_s=600)  # fmt: skip
    assert (first.refusals, first.since, first.retry_at) == (1, 100.0, 130.0)
    assert first.reason == "waiting for a GPU: T4 refused 1x"
    later = plan_wait(gpus="T4", refusals_before=3, since=100.0, now=350.0, wait_s=300,
                      base_s=30, cap_s=600)  # fmt: skip
    assert later.retry_at is None and "refused 4x over 4m10s" in later.reason
    assert waiting_line(first.reason, first.retry_at, 10.0) == f"{first.reason}, next try in 2m"


def _queued(ledger: Ledger, **spec: Any) -> str:
    s = make_spec(**spec)
    ledger.create(s)
    return s.job_id


def test_put_back_leaves_the_job_queued_untouched_with_the_attempt_on_record(
    ledger: Ledger,
) -> None:
    job = _queued(ledger)
    assert ledger.claim(job, "owner-1", 30)
    ledger.transition(job, S.ALLOCATING, owner="owner-1", reason="claimed",
                      fields={"session": "colabq-x", "worker": "w1"})  # fmt: skip
    attempts = put_back(ledger, job, "owner-1", Attempt(1000.0, "w1", Cause.HOST, "401"),
                        "put back by w1: 401")  # fmt: skip
    rec = ledger.get(job)
    assert rec.state is S.QUEUED and rec.owner == "" and rec.get("session") is None
    assert ledger.r.get(ledger.keys.lock(job)) is None
    assert [(a.worker, a.cause) for a in attempts] == [("w1", Cause.HOST)]
    assert ledger.history(job)[-1].reason == "put back by w1: 401"
    assert ledger.claim(job, "owner-2", 30), "any worker may claim it again"


def test_put_back_refuses_a_stale_owner_and_a_job_that_holds_a_session(ledger: Ledger) -> None:
    job = _queued(ledger)
    assert ledger.claim(job, "owner-1", 30)
    attempt = Attempt(1000.0, "w1", Cause.HOST, "x")
    with pytest.raises(StaleOwner):
        put_back(ledger, job, "someone-else", attempt, "x")
    ledger.transition(job, S.ALLOCATING, owner="owner-1", reason="claimed")
    ledger.set_fields(job, owner="owner-1", endpoint="gpu-abc")  # it may hold a GPU now
    with pytest.raises(StaleOwner):
        put_back(ledger, job, "owner-1", attempt, "x")
    assert ledger.get(job).state is S.ALLOCATING


def test_a_job_given_back_by_three_hosts_is_poison(ledger: Ledger) -> None:
    job = _queued(ledger)
    for i, worker in enumerate(["w1", "w1", "w2", "w3"]):
        owner = f"o{i}"
        assert ledger.claim(job, owner, 30)
        state, reason = give_back_host(
            ledger, job, owner, Attempt(1000.0 + i, worker, Cause.HOST, f"broken {worker}"), 3
        )
        if worker != "w3":
            assert state is S.QUEUED, "one host's failures, or two hosts', are the hosts'"
    assert state is S.FAILED and ledger.get(job).state is S.FAILED
    assert "3 hosts" in reason and all(f"broken w{n}" in reason for n in (1, 2, 3))


def test_poison_counts_host_failures_only() -> None:
    capacity = [Attempt(0, f"w{i}", Cause.CAPACITY, "412") for i in range(5)]
    assert poison_reason(capacity, 3) is None


def test_a_capacity_wait_is_sent_again_once_when_due(ledger: Ledger) -> None:
    job = _queued(ledger)
    assert ledger.claim(job, "o", 30)
    put_back(ledger, job, "o", Attempt(1000.0, "w1", Cause.CAPACITY, "T4"),
             "waiting for a GPU: T4 refused 1x", retry_at=1030.0, refusals=1,
             capacity_since=1000.0)  # fmt: skip
    rec = ledger.get(job)
    assert (rec.get("retry_at"), rec.get("capacity_refusals")) == ("1030.0", "1")
    assert promote_due(ledger, 1029.0) == []
    assert promote_due(ledger, 1031.0) == [job]
    assert promote_due(ledger, 1032.0) == [], "each due job is sent by one worker, once"
    assert ledger.get(job).get("retry_at") is None


def test_a_cancelled_waiting_job_is_not_sent_again(ledger: Ledger) -> None:
    job = _queued(ledger)
    assert ledger.claim(job, "o", 30)
    put_back(ledger, job, "o", Attempt(1000.0, "w1", Cause.CAPACITY, "T4"), "waiting",
             retry_at=1030.0, refusals=1, capacity_since=1000.0)  # fmt: skip
    assert ledger.cancel(job, "changed my mind")
    assert promote_due(ledger, 2000.0) == []


def test_a_drain_backs_off_its_probes_and_a_manual_one_waits_for_undrain() -> None:
    r, keys = fakeredis.FakeRedis(), Keys("t")
    h1 = health.note_failure(r, keys, "w1", "401", 100.0, probe_s=5, probe_max_s=60)
    h2 = health.note_failure(r, keys, "w1", "401 again", 106.0, probe_s=5, probe_max_s=60)
    assert (h1.next_probe_at, h2.next_probe_at, h2.since, h2.failures) == (105.0, 116.0, 100.0, 2)
    health.drain_by_hand(r, keys, "w2", "maintenance", 100.0, "alice@h")
    assert health.read(r, keys, "w2").manual  # type: ignore[union-attr]
    assert set(health.read_many(r, keys, ["w1", "w2", "w3"])) == {"w1", "w2"}
    assert health.undrain(r, keys, "w1", remember_s=60) and health.read(r, keys, "w1") is None
    # Broken again soon after its probe passed: its probes back off from where they were.
    h3 = health.note_failure(r, keys, "w1", "401 once more", 200.0, probe_s=5, probe_max_s=60)
    assert (h3.failures, h3.next_probe_at) == (3, 220.0)


class FakeControl:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, tuple[str, ...]]] = []

    def cancel_consumer(self, queue: str, destination: list[str]) -> None:
        self.calls.append(("cancel", queue, tuple(destination)))

    def add_consumer(self, queue: str, destination: list[str]) -> None:
        self.calls.append(("add", queue, tuple(destination)))


class FakeApp:
    def __init__(self) -> None:
        self.control = FakeControl()
        self.sent: list[tuple[str, str]] = []

    def send_task(self, name: str, args: list[str], queue: str, task_id: str, **_: Any) -> None:
        self.sent.append((queue, task_id))


def test_the_prober_keeps_a_drained_worker_off_its_queues_until_a_probe_passes(
    ledger: Ledger, tmp_path: Path
) -> None:
    app, problems = FakeApp(), ["still 401", None]
    settings = Settings(state_dir=tmp_path, drain_probe_s=5, drain_probe_max_s=60)
    prober = Prober(app, settings, ledger, "w1", ["gpu.t4"], lambda s: problems.pop(0))  # type: ignore[arg-type]
    prober.tick(100.0)
    assert app.control.calls == []  # healthy: nothing to do
    health.note_failure(ledger.r, ledger.keys, "w1", "401", 100.0, probe_s=5, probe_max_s=60)
    prober.tick(101.0)  # drained, probe not due: off the queue, no probe yet
    assert app.control.calls == [("cancel", "gpu.t4", ("w1",))] and len(problems) == 2
    prober.tick(106.0)  # due: still broken, the next probe backs off
    h = health.read(ledger.r, ledger.keys, "w1")
    assert h is not None and h.failures == 2 and h.next_probe_at == 116.0
    prober.tick(116.0)  # healthy again: back on its queue
    assert health.read(ledger.r, ledger.keys, "w1") is None
    assert app.control.calls[-1] == ("add", "gpu.t4", ("w1",))


def test_the_prober_sends_due_capacity_retries_to_every_queue_of_the_job(
    ledger: Ledger, tmp_path: Path
) -> None:
    from worker.spec import Gpu

    app = FakeApp()
    job = _queued(ledger, gpu=Gpu.A100, gpu_fallback=(Gpu.L4,))
    assert ledger.claim(job, "o", 30)
    put_back(ledger, job, "o", Attempt(1000.0, "w1", Cause.CAPACITY, "A100/L4"), "waiting",
             retry_at=1010.0, refusals=1, capacity_since=1000.0)  # fmt: skip
    prober = Prober(app, Settings(state_dir=tmp_path), ledger, "w1", ["gpu.a100"], lambda s: None)  # type: ignore[arg-type]
    assert prober.send_due(1011.0) == [job]
    assert app.sent == [("gpu.a100", job), ("gpu.l4", f"{job}.l4")]


class Recorder:
    def __init__(self) -> None:
        self.resent: list[str] = []
        self.drains: list[str | None] = []

    def hooks(self) -> FleetHooks:
        return FleetHooks(resend=lambda spec: self.resent.append(spec.job_id),
                          drain=self.drains.append)  # fmt: skip


def test_a_drained_worker_sends_a_job_it_took_straight_back(ledger: Ledger, tmp_path: Path) -> None:
    spec = make_spec()
    ledger.create(spec)
    health.note_failure(ledger.r, ledger.keys, "w1", "401", 0.0, probe_s=5, probe_max_s=60)
    rec = Recorder()
    out = tasks.execute_job(encode_spec(spec), Settings(state_dir=tmp_path), ledger, "w1",
                            fleet=rec.hooks())  # fmt: skip
    assert out["state"] == "queued" and rec.resent == [spec.job_id] and rec.drains == [None]
    assert ledger.get(spec.job_id).owner == "" and ledger.get(spec.job_id).state is S.QUEUED


def test_a_broken_state_dir_gives_the_job_back_before_any_claim(
    ledger: Ledger, tmp_path: Path
) -> None:
    spec = make_spec()
    ledger.create(spec)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "jobs").write_text("a file where the jobs folder should be")
    rec = Recorder()
    out = tasks.execute_job(encode_spec(spec), Settings(state_dir=tmp_path / "state"), ledger,
                            "w1", fleet=rec.hooks())  # fmt: skip
    assert out["state"] == "queued" and out["put_back"] == "host"
    job = ledger.get(spec.job_id)
    assert job.state is S.QUEUED and job.owner == "", "never owned: nothing strands it"
    assert json.loads(job.get("putbacks") or "[]")[0]["reason"].startswith("state dir")
    assert rec.resent == [spec.job_id] and rec.drains[0] and "state dir" in rec.drains[0]


def test_a_stale_copy_of_a_waiting_job_is_skipped(ledger: Ledger, tmp_path: Path) -> None:
    spec = make_spec()
    ledger.create(spec)
    assert ledger.claim(spec.job_id, "o", 30)
    put_back(ledger, spec.job_id, "o", Attempt(1000.0, "w1", Cause.CAPACITY, "T4"), "waiting",
             retry_at=4e9, refusals=1, capacity_since=1000.0)  # fmt: skip
    rec = Recorder()
    out = tasks.execute_job(encode_spec(spec), Settings(state_dir=tmp_path), ledger, "w2",
                            fleet=rec.hooks())  # fmt: skip
    assert out["state"] == "skipped" and "waits for a GPU" in out["reason"]
    assert ledger.get(spec.job_id).owner == "" and rec.resent == []


def test_the_prober_takes_back_a_job_whose_owner_died_under_it_once_a_minute(
    ledger: Ledger, tmp_path: Path
) -> None:
    sent: list[str] = []
    prober = Prober(
        FakeApp(), Settings(state_dir=tmp_path), ledger, "w1", ["gpu.t4"],  # type: ignore[arg-type]
        lambda s: None, orphans=lambda: ["j1"], adopt=sent.append,
    )  # fmt: skip
    assert prober.take_back(100.0) == ["j1"]
    assert prober.take_back(110.0) == [] and prober.take_back(150.0) == []
    assert prober.take_back(161.0) == ["j1"] and sent == ["j1", "j1"]


@pytest.mark.parametrize(
    ("result", "raised"),
    [
        ({"state": "succeeded"}, None),
        ({"state": "failed", "reason": "job exited 3", "exit_code": 3}, tasks.JobDidNotSucceed),
        # Given back: Flower shows RETRY until the next attempt (same task id) moves the row on.
        ({"state": "queued", "reason": "put back by w1: 401", "put_back": "host"}, "Retry"),
        # Not this job's attempt: the row of its real attempt is left as it is.
        ({"state": "skipped", "reason": "job is owned by another runner"}, "Ignore"),
        ({"state": "failed", "reason": "already terminal"}, "Ignore"),
    ],
)
def test_a_task_ends_as_flower_must_show_it(result: dict[str, Any], raised: object) -> None:
    from celery.exceptions import Ignore, Retry

    expected = {"Retry": Retry, "Ignore": Ignore}.get(str(raised), raised)
    if expected is None:
        assert tasks._ended(result) == result
    else:
        with pytest.raises(expected):  # type: ignore[call-overload]
            tasks._ended(result)
