"""The janitor: what it settles from a dead owner's records, and what it must leave alone."""

from __future__ import annotations

import fakeredis
import pytest

from tests.factories import make_spec
from worker.clock import FakeClock
from worker.janitor import janitor_pass, settle_outcome
from worker.records.keys import Keys
from worker.records.ledger import JobRecord, Ledger
from worker.states import JobState as S
from worker.store.artifacts import Verification

OK = Verification(True, 0, ("logs/x/exit_code",), (), "")
MISSING = Verification(False, 0, (), ("ckpt",), "missing: ckpt")


def record(state: S = S.RUNNING, endpoint: str | None = "gpu-1") -> JobRecord:
    fields = {"endpoint": endpoint} if endpoint else {}
    return JobRecord("j", make_spec(), state, "dead", "", 0.0, 0.0, fields)


CASES = [
    ("died before assignment", record(endpoint=None), {}, OK, S.FAILED_LOST),
    ("session not verified gone: leave alone", record(), {"exec_exit": "0"}, OK, None),
    (
        "gone, exit 0, verified",
        record(),
        {"gone_verified_at": "1", "exec_exit": "0"},
        OK,
        S.SUCCEEDED,
    ),
    (
        "gone, exit 0, artifacts missing",
        record(),
        {"gone_verified_at": "1", "exec_exit": "0"},
        MISSING,
        S.FAILED,
    ),
    ("gone, exit 3", record(), {"gone_verified_at": "1", "exec_exit": "3"}, OK, S.FAILED),
    ("gone, exit unknown", record(), {"gone_verified_at": "1"}, OK, S.FAILED_LOST),
    (
        "gone, results recovered",
        record(),
        {"gone_verified_at": "1", "exec_exit": "0", "results_local": "h:/r"},
        OK,
        S.FAILED,
    ),
    (
        "endpoint only seen by the watchdog, not gone",
        record(endpoint=None),
        {"endpoint": "gpu-9"},
        OK,
        None,
    ),
]


@pytest.mark.parametrize(("case", "rec", "watch", "v", "expect"), CASES, ids=[c[0] for c in CASES])
def test_settle_outcome(
    case: str, rec: JobRecord, watch: dict, v: Verification, expect: S | None
) -> None:
    got = settle_outcome(rec, watch, lambda spec: v)
    assert (got[0] if got else None) is expect


@pytest.fixture
def ledger() -> Ledger:
    return Ledger(fakeredis.FakeRedis(), FakeClock(), Keys("t"), log_maxlen=100)


def _running_job(ledger: Ledger) -> str:
    job_id, _ = ledger.create(make_spec())
    assert ledger.claim(job_id, "w1", ttl_s=30)
    ledger.transition(job_id, S.ALLOCATING, owner="w1", reason="claimed")
    ledger.set_fields(job_id, owner="w1", endpoint="gpu-1")
    ledger.transition(job_id, S.STARTING, owner="w1", reason="up")
    ledger.transition(job_id, S.RUNNING, owner="w1", reason="run")
    return job_id


def test_pass_settles_an_expired_job_whose_session_is_gone(ledger: Ledger) -> None:
    job_id = _running_job(ledger)
    ledger.record_watch(job_id, {"gone_verified_at": "1", "exec_exit": "0"})
    assert janitor_pass(ledger, dry_run=False, verify=lambda s: OK).expired == ()  # lease alive
    ledger.r.delete(ledger.keys.lock(job_id))  # the owner died: its lock expired
    ledger.clock.advance(60)  # type: ignore[attr-defined]
    dry = janitor_pass(ledger, dry_run=True, verify=lambda s: OK)
    assert ledger.get(job_id).state is S.RUNNING and "would settle SUCCEEDED" in dry.acted[0]
    report = janitor_pass(ledger, dry_run=False, verify=lambda s: OK)
    assert report.expired == (job_id,)
    rec = ledger.get(job_id)
    assert rec.state is S.SUCCEEDED and rec.owner != "w1"
    assert [h.state for h in ledger.history(job_id)][-2:] == [S.RELEASING, S.SUCCEEDED]


def test_pass_leaves_a_live_session_to_its_watchdog(ledger: Ledger) -> None:
    job_id = _running_job(ledger)
    ledger.r.delete(ledger.keys.lock(job_id))
    ledger.clock.advance(60)  # type: ignore[attr-defined]
    report = janitor_pass(ledger, dry_run=False, verify=lambda s: OK)
    assert ledger.get(job_id).state is S.RUNNING
    assert report.left_alone and "not verified gone" in report.left_alone[0]


def test_only_one_pass_at_a_time(ledger: Ledger) -> None:
    ledger.r.set(ledger.keys.janitor_lock(), "other", px=60_000)
    assert janitor_pass(ledger, dry_run=False).ran is False
