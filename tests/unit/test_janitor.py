"""The janitor: what it finds (pure), what it settles from a dead owner's records, what it does
in a pass, and what it must leave alone."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import fakeredis
import pytest

from tests.factories import SESSION, make_spec
from worker.clock import FakeClock
from worker.colab.parse import ServerSession
from worker.errors import ColabTransportError
from worker.janitor.classify import Do, find_account_findings, find_job_findings
from worker.janitor.run import JanitorDeps, janitor_pass
from worker.janitor.settle import settle_outcome
from worker.janitor.snapshot import JobView, Snapshot
from worker.metrics.counts import ACTIONS, read_counts
from worker.metrics.ended import read_ended
from worker.records.keys import Keys
from worker.records.ledger import ForwardItem, Ledger
from worker.records.record import JobRecord
from worker.spec import JobSpec
from worker.states import JobState as S
from worker.store.artifacts import Verification

OK = Verification(True, 0, ("logs/x/exit_code",), (), "")
MISSING = Verification(False, 0, (), ("ckpt",), "missing: ckpt")
NOW = 100_000.0


def record(state: S = S.RUNNING, endpoint: str | None = "gpu-1") -> JobRecord:
    fields = {"endpoint": endpoint} if endpoint else {}
    return JobRecord("j", make_spec(), state, "dead", "", 0.0, 0.0, fields)


SETTLE_CASES = [
    ("died before assignment", record(endpoint=None), {}, OK, None, S.FAILED_LOST),
    ("died before assignment, cancelled", record(endpoint=None), {}, OK, "no", S.CANCELLED),
    ("session not verified gone: leave alone", record(), {"exec_exit": "0"}, OK, None, None),
    ("gone, exit 0, verified", record(), {"gone_verified_at": "1", "exec_exit": "0"}, OK, None,
     S.SUCCEEDED),
    ("gone, exit 0, artifacts missing", record(), {"gone_verified_at": "1", "exec_exit": "0"},
     MISSING, None, S.FAILED),
    ("gone, exit 3", record(), {"gone_verified_at": "1", "exec_exit": "3"}, OK, None, S.FAILED),
    ("gone, exit 127, the wrapper said why", record(),
     {"gone_verified_at": "1", "exec_exit": "127", "exec_exit_why": "nobody\tsh: 1: uv: not found"},
     OK, None, S.FAILED),
    ("gone, exit only in the store", record(), {"gone_verified_at": "1"}, OK, None, S.SUCCEEDED),
    ("gone, exit nowhere", record(), {"gone_verified_at": "1"},
     Verification(False, None, (), (), "no exit_code"), None, S.FAILED_LOST),
    ("gone, cancelled", record(), {"gone_verified_at": "1", "exec_exit": "0"}, OK, "stop",
     S.CANCELLED),
    ("gone, results recovered", record(),
     {"gone_verified_at": "1", "exec_exit": "0", "results_local": "h:/r"}, OK, None, S.FAILED),
    ("endpoint only seen by the watchdog, not gone", record(endpoint=None), {"endpoint": "gpu-9"},
     OK, None, None),
    # The code stage said why the job never ran: its own failure, not an unknown outcome.
    ("gone, code not on the VM", record(),
     {"gone_verified_at": "1", "exec_code": '{"ok": false, "reason": "not fetchable"}'},
     Verification(False, None, (), (), "no exit_code"), None, S.FAILED),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "rec", "watch", "v", "cancel", "expect"),
    SETTLE_CASES,
    ids=[c[0] for c in SETTLE_CASES],
)
def test_settle_outcome(
    case: str, rec: JobRecord, watch: dict, v: Verification, cancel: str | None, expect: S | None
) -> None:
    got = settle_outcome(rec, watch, lambda spec: v, cancel)
    assert (got.state if got else None) is expect
    if "exec_code" in watch:
        assert got is not None and "the job's code is not on the VM: not fetchable" in got.reason
    if "exec_exit_why" in watch:
        assert got is not None and got.reason.startswith(
            "owner died; a command was not found: uv (exit 127)"
        ), got.reason


# --- finding (pure) -------------------------------------------------------------------------


def view(job_id: str = "j1", state: S | None = S.RUNNING, **kw: object) -> JobView:
    base: dict[str, object] = dict(
        job_id=job_id, state=state, owner="o", endpoint="gpu-1", session=SESSION,
        created_at=NOW - 10, lock_held=False, watchdog_beat_at=None, gone_verified=False,
        exec_exit=None, final_upload=None, results_local=None, cancel=False, resent_at=None,
        lease_expired=True,
    )  # fmt: skip
    base.update(kw)
    return JobView(**base)  # type: ignore[arg-type]


JOB_CASES = [
    ("owner live: nothing", view(lock_held=True), None),
    ("owner and watchdog gone: adopt (host lost)", view(), Do.ADOPT),
    ("owner gone, watchdog alive: leave to it", view(watchdog_beat_at=NOW - 5), Do.LEAVE),
    ("owner gone, watchdog stale: adopt", view(watchdog_beat_at=NOW - 500), Do.ADOPT),
    ("owner gone, session verified gone: settle", view(gone_verified=True), Do.SETTLE),
    ("terminal with a lease entry: drop it", view(state=S.SUCCEEDED), Do.DROP_LEASE),
    ("record expired: forget", view(state=None), Do.FORGET),
    ("queued within grace: nothing", view(state=S.QUEUED, owner="", created_at=NOW - 10), None),
    ("queued, message waiting in its queue: nothing",
     view("waiting", state=S.QUEUED, owner="", created_at=NOW - 5000), None),
    ("queued, no queue holds it: send again",
     view(state=S.QUEUED, owner="", created_at=NOW - 5000), Do.RESEND),
    ("queued, sent again already: leave", view(state=S.QUEUED, owner="", created_at=NOW - 5000,
                                               resent_at=NOW - 100), Do.LEAVE),
    ("queued, its claimant gone: clear the claim", view(state=S.QUEUED, created_at=NOW - 10),
     Do.UNCLAIM),
]  # fmt: skip


@pytest.mark.parametrize(("case", "v", "expect"), JOB_CASES, ids=[c[0] for c in JOB_CASES])
def test_job_findings(case: str, v: JobView, expect: Do | None) -> None:
    snap = Snapshot(NOW, (v,), (v.job_id,))
    found = find_job_findings(
        snap, watchdog_stale_s=90, stranded_grace_s=600, queued_ids={"waiting"}
    )
    assert [f.do for f in found] == ([expect] if expect else [])


def sess(ep: str) -> ServerSession:
    return ServerSession(None, ep, "T4", "Standard", "GPU")


ACCOUNT_CASES = [
    ("unknown: never stopped", {}, {}, 0.0, Do.LEAVE, "never stopped"),
    ("unknown seen for a day: still never stopped", {}, {}, 86_400.0, Do.LEAVE, "never stopped"),
    ("live job", {"ep": "j1"}, {"j1": view(lock_held=True)}, 10_000.0, Do.LEAVE, "live"),
    ("live by its watchdog", {"ep": "j1"}, {"j1": view(watchdog_beat_at=NOW - 1)}, 10_000.0,
     Do.LEAVE, "live"),
    ("job over, within grace", {"ep": "j1"}, {"j1": view(state=S.FAILED)}, 10.0, Do.LEAVE,
     "orphan"),
    ("job over, past grace: stop", {"ep": "j1"}, {"j1": view(state=S.FAILED)}, 400.0,
     Do.STOP_ORPHAN, "orphan"),
    ("job running, owners dead: the adopter releases it", {"ep": "j1"}, {"j1": view()}, 400.0,
     Do.LEAVE, "adopter"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "owners", "jobs", "age", "expect", "word"),
    ACCOUNT_CASES,
    ids=[c[0] for c in ACCOUNT_CASES],
)
def test_account_findings(
    case: str, owners: dict, jobs: dict, age: float, expect: Do, word: str
) -> None:
    [f] = find_account_findings(
        [sess("ep")], owners, jobs, {"ep": NOW - age}, now=NOW, grace_s=300, watchdog_stale_s=90
    )
    assert f.do is expect and word in f.why


# --- a pass ---------------------------------------------------------------------------------


@dataclass
class Calls:
    account: list[ServerSession] = field(default_factory=list)
    remote: list[str] = field(default_factory=list)
    fail_account: bool = False


def deps_for(ledger: Ledger, calls: Calls) -> JanitorDeps:
    def account() -> list[ServerSession]:
        calls.remote.append("sessions")
        if calls.fail_account:
            raise ColabTransportError("colab sessions: HTTP 503")
        return calls.account

    def verify(spec: JobSpec) -> Verification:
        calls.remote.append("verify")
        return OK

    def remote(what: str) -> str:
        calls.remote.append(what)
        return what

    return JanitorDeps(
        ledger=ledger, verify=verify, location=lambda spec: "store",
        account=account, stop_orphan=lambda v, ep: remote(f"stop {ep}"),
        adopt=lambda j: remote(f"adopt {j}"), resend=lambda spec: remote(f"resend {spec.job_id}"),
        queued_ids=set,
    )  # fmt: skip


@pytest.fixture
def ledger() -> Ledger:
    return Ledger(fakeredis.FakeRedis(), FakeClock(), Keys("t"), log_maxlen=100)


def _running_job(ledger: Ledger, endpoint: str = "gpu-1") -> str:
    job_id, _ = ledger.create(make_spec())
    assert ledger.claim(job_id, "w1", ttl_s=30)
    ledger.transition(job_id, S.ALLOCATING, owner="w1", reason="claimed")
    ledger.set_fields(job_id, owner="w1", endpoint=endpoint, session=SESSION)
    ledger.transition(job_id, S.STARTING, owner="w1", reason="up")
    ledger.transition(job_id, S.RUNNING, owner="w1", reason="run")
    return job_id


def _owner_dies(ledger: Ledger, job_id: str) -> None:
    ledger.r.delete(ledger.keys.lock(job_id))
    ledger.clock.advance(60)  # type: ignore[attr-defined]


def test_pass_settles_an_expired_job_whose_session_is_gone(ledger: Ledger) -> None:
    job_id = _running_job(ledger)
    ledger.record_watch(job_id, {"gone_verified_at": "1", "exec_exit": "0"})
    calls = Calls()
    assert janitor_pass(deps_for(ledger, calls), dry_run=False).did("settle") == []
    _owner_dies(ledger, job_id)
    calls.remote.clear()
    dry = janitor_pass(deps_for(ledger, calls), dry_run=True)
    assert ledger.get(job_id).state is S.RUNNING and dry.rows[0].did == "would: settle"
    assert calls.remote == []  # a dry run makes no remote call
    report = janitor_pass(deps_for(ledger, calls), dry_run=False)
    assert [r.subject for r in report.did("settle")] == [job_id]
    rec = ledger.get(job_id)
    assert rec.state is S.SUCCEEDED and rec.owner != "w1" and rec.get("exit_code") == "0"
    assert [h.state for h in ledger.history(job_id)][-2:] == [S.RELEASING, S.SUCCEEDED]
    # The janitor's report counts what was held too: from the endpoint to the settlement.
    settled = json.loads(rec.get("report") or "{}")
    assert settled["duration"]["held_s"] == 60.0
    assert settled["compute_units"]["units"] == round(1.76 * 60 / 3600, 4)
    # `colabq metrics` counts the settlement (the dry run counted nothing), as the report says.
    ended = read_ended(ledger.r.hgetall(ledger.keys.metrics_ended()))
    assert ended.jobs == {("succeeded", "T4", "none", "none"): 1}
    assert ended.held_s == {("T4", "none", "none"): 60.0}
    assert read_counts(ledger.r.hgetall(ledger.keys.metrics_janitor()), ACTIONS) == (
        {("none", "settled"): 1}, 0,
    )  # fmt: skip


def test_pass_leaves_a_session_to_its_live_watchdog(ledger: Ledger) -> None:
    job_id = _running_job(ledger)
    _owner_dies(ledger, job_id)
    ledger.record_watch(job_id, {"heartbeat_at": repr(ledger.clock.time())})
    report = janitor_pass(deps_for(ledger, Calls()), dry_run=False)
    assert ledger.get(job_id).state is S.RUNNING
    assert report.rows[0].did == "left alone" and "watchdog" in report.rows[0].why


def test_host_lost_job_is_adopted_once(ledger: Ledger) -> None:
    job_id = _running_job(ledger)
    _owner_dies(ledger, job_id)
    calls = Calls()
    janitor_pass(deps_for(ledger, calls), dry_run=False)
    janitor_pass(deps_for(ledger, calls), dry_run=False)  # the adopter is still starting
    assert calls.remote.count(f"adopt {job_id}") == 1


def test_account_orphan_stopped_after_grace_unknown_never(ledger: Ledger) -> None:
    job_id = _running_job(ledger, endpoint="gpu-mine")
    ledger.transition(job_id, S.RELEASING, owner="w1", reason="x")
    ledger.transition(job_id, S.FAILED, owner="w1", reason="release not verified")
    ledger.release_lock(job_id, "w1")
    calls = Calls(account=[sess("gpu-mine"), sess("gpu-notebook")])
    first = janitor_pass(deps_for(ledger, calls), dry_run=False)
    assert "stop gpu-mine" not in calls.remote  # within the grace period
    assert {r.subject: r.did for r in first.rows} == {
        "gpu-mine": "left alone", "gpu-notebook": "left alone",
    }  # fmt: skip
    ledger.clock.advance(400)  # type: ignore[attr-defined]
    later = janitor_pass(deps_for(ledger, calls), dry_run=False)
    assert calls.remote.count("stop gpu-mine") == 1
    stopped, _ = read_counts(ledger.r.hgetall(ledger.keys.metrics_janitor()), ACTIONS)
    assert stopped == {("none", "orphan_stopped"): 1}  # for `colabq metrics`
    assert not any("gpu-notebook" in c for c in calls.remote if c.startswith("stop"))
    [unknown] = [r for r in later.rows if r.subject == "gpu-notebook"]
    assert unknown.did == "left alone" and unknown.seen.startswith("6m")


def test_an_account_error_is_reported_not_fatal(ledger: Ledger) -> None:
    report = janitor_pass(deps_for(ledger, Calls(fail_account=True)), dry_run=False)
    assert report.rows[0].kind == "account" and report.rows[0].did == "failed"
    assert not report.account_measured


def test_stranded_queued_job_is_sent_again_once(ledger: Ledger) -> None:
    job_id, _ = ledger.create(make_spec())
    ledger.clock.advance(3600)  # type: ignore[attr-defined]
    calls = Calls()
    janitor_pass(deps_for(ledger, calls), dry_run=False)
    janitor_pass(deps_for(ledger, calls), dry_run=False)
    assert calls.remote.count(f"resend {job_id}") == 1
    assert ledger.get(job_id).get("resent_at")


def test_leases_of_finished_jobs_and_expired_records_are_dropped(ledger: Ledger) -> None:
    job_id = _running_job(ledger)
    ledger.append_log(job_id, "epoch 1")
    ledger.transition(job_id, S.RELEASING, owner="w1", reason="x")
    ledger.transition(job_id, S.SUCCEEDED, owner="w1", reason="done")
    ledger.r.delete(ledger.keys.lock(job_id))  # its lease entry stays behind
    ledger.clock.advance(60)  # type: ignore[attr-defined]
    janitor_pass(deps_for(ledger, Calls()), dry_run=False)
    assert ledger.r.zscore(ledger.keys.leases(), job_id) is None
    assert not ledger.r.sismember(ledger.keys.active(), job_id)
    assert 0 < ledger.r.ttl(ledger.keys.job(job_id)) <= ledger.retention_s
    assert 0 < ledger.r.ttl(ledger.keys.log(job_id)) <= ledger.retention_s


def test_a_line_forwarded_after_the_end_never_leaves_a_stream_forever(ledger: Ledger) -> None:
    job_id = _running_job(ledger)
    ledger.transition(job_id, S.RELEASING, owner="w1", reason="x")
    ledger.transition(job_id, S.SUCCEEDED, owner="w1", reason="done")
    ledger.append_log(job_id, "a late line from the runner")
    assert 0 < ledger.r.ttl(ledger.keys.log(job_id)) <= ledger.retention_s
    ledger.r.delete(ledger.keys.log(job_id))
    ledger.forward(job_id, 0, [ForwardItem(12, "l", "a late line")])
    assert 0 < ledger.r.ttl(ledger.keys.log(job_id)) <= ledger.retention_s


def test_only_one_pass_at_a_time(ledger: Ledger) -> None:
    ledger.r.set(ledger.keys.janitor_lock(), "other", px=60_000)
    assert janitor_pass(deps_for(ledger, Calls()), dry_run=False).ran is False
