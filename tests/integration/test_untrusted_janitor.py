"""The janitor when something bad is already inside (written with an unrestricted connection: an
old record, a corrupted entry, a rule misapplied by an admin, a password-only deployment), on the
real Redis: junk in every index, record, hash and queue list a pass reads is reported once and
skipped (and dropped from the indexes the janitor prunes); a finding whose handling raises
anything fails alone and the pass acts on the others; a live job that fell out of the index of
live jobs, and whose queue message is gone, is found by the walk over the records and sent
again (`worker.janitor.reconcile`). The remote side (Colab, the store, the adopter) is faked."""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
import redis

from tests.factories import SESSION, make_spec
from worker.clock import FakeClock
from worker.colab.parse import ServerSession
from worker.janitor.run import JanitorDeps, JanitorReport, Row, janitor_pass
from worker.janitor.wiring import waiting_job_ids
from worker.records.keys import Keys, queue_lists
from worker.records.ledger import Ledger
from worker.spec import Gpu, JobSpec, queue_for
from worker.states import JobState as S
from worker.store.artifacts import Verification

pytestmark = pytest.mark.integration

OK = Verification(True, 0, ("logs/x/exit_code",), (), "")


@dataclass
class Remote:
    """The far side of the network, as a pass would call it; `adopt_fails` raises an OSError
    (the adopter's log could not be opened) for those jobs."""

    account: list[ServerSession] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    adopt_fails: set[str] = field(default_factory=set)

    def adopt(self, job_id: str) -> str:
        if job_id in self.adopt_fails:
            raise PermissionError(13, "Permission denied", f"/state/janitor/adopt-{job_id}.log")
        self.calls.append(f"adopt {job_id}")
        return "adopter pid 1"

    def resend(self, spec: JobSpec) -> str:
        self.calls.append(f"resend {spec.job_id}")
        return "to gpu.t4"


def deps_for(ledger: Ledger, remote: Remote, queue_prefix: str, **kw: object) -> JanitorDeps:
    def verify(spec: JobSpec) -> Verification:
        return OK

    return JanitorDeps(
        ledger=ledger, verify=verify, location=lambda spec: "store",
        account=lambda: remote.account, stop_orphan=lambda v, ep: f"stopped {ep}",
        adopt=remote.adopt, resend=remote.resend,
        queued_ids=lambda: waiting_job_ids(ledger, queue_prefix), **kw,  # type: ignore[arg-type]
    )  # fmt: skip


@pytest.fixture
def queue_prefix() -> str:
    return f"q{secrets.token_hex(4)}."


@pytest.fixture
def ledger(redis_client: redis.Redis, key_prefix: str, queue_prefix: str) -> Iterator[Ledger]:
    yield Ledger(redis_client, FakeClock(), Keys(key_prefix), log_maxlen=100)
    for pattern in (f"{key_prefix}:*", f"{queue_prefix}*"):
        for key in redis_client.scan_iter(pattern):
            redis_client.delete(key)


def running(ledger: Ledger, endpoint: str) -> str:
    job_id, _ = ledger.create(make_spec())
    assert ledger.claim(job_id, "w1", ttl_s=30)
    ledger.transition(job_id, S.ALLOCATING, owner="w1", reason="claimed")
    ledger.set_fields(job_id, owner="w1", endpoint=endpoint, session=SESSION)
    ledger.transition(job_id, S.STARTING, owner="w1", reason="up")
    ledger.transition(job_id, S.RUNNING, owner="w1", reason="run")
    ledger.r.delete(ledger.keys.lock(job_id))  # its owner died
    return job_id


def rows_of(report: JanitorReport, subject: str) -> list[Row]:
    return [r for r in report.rows if r.subject == subject]


def test_junk_everywhere_a_pass_reads_is_skipped_and_the_other_findings_are_acted_on(
    ledger: Ledger, queue_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    r, k = ledger.r, ledger.keys
    settle = running(ledger, "gpu-settle")
    ledger.record_watch(settle, {"gone_verified_at": "1", "exec_exit": "0"})
    fails_open, adopted = running(ledger, "gpu-open"), running(ledger, "gpu-adopt")
    wrong_type = running(ledger, "gpu-wrongtype")  # its cancel flag is a hash: WRONGTYPE
    ledger.record_watch(wrong_type, {"gone_verified_at": "1", "exec_exit": "0"})
    r.hset(k.cancel(wrong_type), "x", "y")
    damaged = running(ledger, "gpu-damaged")  # its spec no longer parses
    ledger.record_watch(damaged, {"gone_verified_at": "1", "exec_exit": "0"})
    r.hset(k.job(damaged), "spec", "{not json")
    no_watch = running(ledger, "gpu-nowatch")  # its observations are a string
    r.set(k.watch(no_watch), "junk")
    stranded, _ = ledger.create(make_spec())
    r.hset(k.job(stranded), mapping={"retry_at": "junk", "resent_at": "inf"})
    waiting, _ = ledger.create(make_spec())
    not_a_hash, _ = ledger.create(make_spec())
    r.delete(k.job(not_a_hash))
    r.rpush(k.job(not_a_hash), "a list")
    ledger.clock.advance(3600)  # type: ignore[attr-defined]

    # Junk in every index, hash and queue list a pass reads.
    junk = [b"../../etc/passwd", b"\xff\xfe", b"/abs/x", b"a\x00b", b"z" * 300, b"UPPER0123"]
    r.sadd(k.active(), *junk)
    r.zadd(k.leases(), {b"../lease": 1.0, b"\xff": 9e12})
    r.zadd(k.tracker_check(), {b"../track": ledger.clock.time()})
    r.hset(k.endpoints(), "gpu-junkowner", b"../../x")
    r.hset(k.first_seen(), mapping={b"\xff": b"x", "gpu-junkowner": "nan"})
    lists = queue_lists(queue_for(Gpu.T4, queue_prefix))
    messages = [{"no": "headers"}, {"headers": {"id": "../x"}}, {"headers": {"id": waiting}}]
    r.rpush(lists[0], b"not json", *(json.dumps(m) for m in messages))
    r.rpush(lists[1], b"\xff\xfe")
    listed = ("gpu-junkowner", "bad endpoint/..", "gpu-adopt")
    remote = Remote(
        account=[ServerSession(None, ep, "T4", "Standard", "GPU") for ep in listed],
        adopt_fails={fails_open},
    )

    with caplog.at_level(logging.WARNING):
        report = janitor_pass(deps_for(ledger, remote, queue_prefix), dry_run=False)

    assert report.ran and report.account_measured
    # Acted on: settled, adopted, sent again; the record that is no hash forgotten.
    assert ledger.get(settle).state is S.SUCCEEDED
    assert remote.calls.count(f"adopt {adopted}") == 1
    assert remote.calls.count(f"adopt {no_watch}") == 1  # unreadable observations: none
    assert remote.calls.count(f"resend {stranded}") == 1 and ledger.get(stranded).get("resent_at")
    assert f"resend {waiting}" not in remote.calls  # its message waits among the junk
    assert [x.did for x in rows_of(report, not_a_hash)] == ["did: forget"]
    # Each finding that raised failed alone, named with what it raised.
    [opened] = rows_of(report, fails_open)
    assert opened.did == "failed: adopt" and "PermissionError" in opened.why, opened
    [typed] = rows_of(report, wrong_type)
    assert typed.did == "failed: settle" and "WRONGTYPE" in typed.why, typed
    [bad_record] = rows_of(report, damaged)
    assert bad_record.did == "failed: settle" and "damaged" in bad_record.why, bad_record
    assert ledger.state_of(wrong_type) is S.RUNNING  # nothing half done
    # The junk: one row each, dropped from the indexes the janitor prunes; never a job.
    dropped = [(x.subject, x.seen) for x in report.rows if x.kind == "index entry"]
    shown = [(k.active(), repr(j) if len(repr(j)) <= 60 else f"{repr(j)[:57]}...") for j in junk]
    shown += [
        (k.leases(), "b'../lease'"),
        (k.leases(), "b'\\xff'"),
        (k.tracker_check(), "b'../track'"),
    ]
    assert sorted(dropped) == sorted(shown)
    assert all(x.did == "did: drop it" for x in report.rows if x.kind == "index entry")
    assert not set(junk) & set(r.smembers(k.active()))
    assert (
        r.zscore(k.leases(), b"../lease") is None
        and r.zscore(k.tracker_check(), b"../track") is None
    )
    [unknown] = rows_of(report, "gpu-junkowner")
    assert unknown.did == "left alone" and "never stopped" in unknown.why
    [not_endpoint] = [
        x for x in report.rows if x.kind == "assignment" and "bad endpoint" in x.subject
    ]
    assert not_endpoint.did == "left alone" and "not an endpoint" in not_endpoint.why
    # Reported in the log, naming where; a second pass finds no junk and reports nothing new.
    logged = [x.getMessage() for x in caplog.records if x.name == "worker.records.ids"]
    assert any(k.active() in line and "../../etc/passwd" in line for line in logged), logged
    assert any("../../x" in line and k.endpoints() in line for line in logged), logged
    caplog.clear()
    again = janitor_pass(deps_for(ledger, remote, queue_prefix), dry_run=False)
    assert again.ran and not [x for x in again.rows if x.kind == "index entry"]
    assert not [x for x in caplog.records if "../../etc/passwd" in x.getMessage()]


def test_a_live_job_out_of_the_index_whose_message_is_gone_is_found_and_sent_again(
    ledger: Ledger, queue_prefix: str
) -> None:
    r, k = ledger.r, ledger.keys
    lost, _ = ledger.create(make_spec())
    kept, _ = ledger.create(make_spec())
    over = running(ledger, "gpu-over")
    ledger.transition(over, S.RELEASING, owner="w1", reason="x")
    ledger.transition(over, S.SUCCEEDED, owner="w1", reason="done")
    # A hostile user (or a lost write) removes it from the index of live jobs and the jobs
    # index, and deletes the GPU queue's list: nothing names it any more but its record.
    r.srem(k.active(), lost)
    r.zrem(k.jobs(), lost)
    r.srem(k.active(), over)  # an ended job out of the index stays out
    ledger.clock.advance(3600)  # type: ignore[attr-defined]
    remote = Remote()
    deps = deps_for(ledger, remote, queue_prefix, reconcile_keys=1_000_000)

    dry = janitor_pass(deps, dry_run=True)
    assert [x.did for x in rows_of(dry, lost)] == [f"would: put it back in {k.active()}",
                                                    "would: send again"]  # fmt: skip
    assert not r.sismember(k.active(), lost) and r.get(k.reconcile_cursor()) is None

    report = janitor_pass(deps, dry_run=False)
    assert rows_of(report, lost)[0].did == f"did: put it back in {k.active()}"
    assert sorted(remote.calls) == sorted([f"resend {kept}", f"resend {lost}"])
    assert r.sismember(k.active(), lost) and r.zscore(k.jobs(), lost) is not None
    assert not r.sismember(k.active(), over)
    assert not [x for x in rows_of(report, over) if "put it back" in x.did]
    again = janitor_pass(deps, dry_run=False)  # sent once, as any stranded job
    assert remote.calls.count(f"resend {lost}") == 1
    assert [x.did for x in rows_of(again, lost)] == ["left alone"]


def test_the_walk_goes_on_from_where_the_last_pass_stopped(
    ledger: Ledger, queue_prefix: str
) -> None:
    r, k = ledger.r, ledger.keys
    lost = []
    for _ in range(30):
        job_id, _ = ledger.create(make_spec())
        r.srem(k.active(), job_id)
        lost.append(job_id)
    deps = deps_for(ledger, Remote(), queue_prefix, reconcile_keys=20)
    found: list[str] = []
    passes, most = 0, 3 * int(r.dbsize()) // 20 + 10
    while passes < most:  # one whole cycle over the database, 20 keys a pass
        report = janitor_pass(deps, dry_run=False)
        found += [x.subject for x in report.rows if x.did.startswith("did: put it back")]
        passes += 1
        if r.get(k.reconcile_cursor()) == b"0":
            break
    assert passes > 1 and sorted(found) == sorted(lost)  # each found once, over several passes
    assert r.scard(k.active()) == 30


class SentApp:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def send_task(self, name: str, args: list[str], **_: object) -> None:
        self.sent.append(json.loads(args[0])["job_id"])


def test_the_prober_sends_the_due_jobs_whatever_their_neighbours_records_hold(
    ledger: Ledger, queue_prefix: str
) -> None:
    from worker.fleet.prober import Prober
    from worker.settings import load_settings

    r, k = ledger.r, ledger.keys
    now = ledger.clock.time()
    due, _ = ledger.create(make_spec())
    # Jobs whose dependencies name no job, or a job whose record is damaged: they can never run.
    broken, _ = ledger.create(make_spec())
    dep, _ = ledger.create(make_spec())
    r.hset(k.job(dep), "state", "exploded")
    r.hset(k.job(broken), "after", f"{dep}:ok")
    nameless, _ = ledger.create(make_spec())
    r.hset(k.job(nameless), "after", "../../x:ok")
    for job_id in (due, broken, nameless):
        r.hset(k.job(job_id), "retry_at", repr(now))
    r.zadd(k.deferred(), {due: now, broken: now, nameless: now, b"../../y": now, b"\xff": now})
    app = SentApp()
    settings = load_settings(key_prefix=k.prefix, queue_prefix=queue_prefix)
    prober = Prober(app, settings, ledger, "w@h", (), lambda s: None)  # type: ignore[arg-type]
    prober.send_due(now)
    assert app.sent == [due]
    for job_id, why in ((broken, "damaged"), (nameless, "not a job id")):
        rec = ledger.get(job_id)
        assert rec.state is S.CANCELLED and why in rec.reason, rec.reason
    assert r.zcard(k.deferred()) == 0
