"""A run's projected end against its own time limit (`limit`), and the owner's guard (`guard`) on
the real Redis: the overrun warning said once per segment, early, as an event the notifier
delivers to the targets that would be told of TIMED_OUT; what Flower is told, at most every few
seconds; nothing it does can stop the follow loop."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.factories import make_spec
from worker.clock import FakeClock
from worker.notify.consumer import Notifier
from worker.notify.targets import load_targets
from worker.progress import record
from worker.progress.guard import ProgressGuard
from worker.progress.limit import min_span_s, overrun, project, warning
from worker.progress.record import Limit, Reading
from worker.records import events
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.states import JobState as S

T0 = 1_000_000.0
HOUR = 3600.0


def reading(
    done: float, at: float, rate: float | None, span: float, total: float | None = 100.0
) -> Reading:
    return Reading(at, done, total, "it", "tqdm", rate, span, T0, 0.0)


LIMIT = Limit(T0, 6 * HOUR)  # a 6 h limit from T0


@pytest.mark.parametrize(
    ("r", "over"),
    [
        # 10 % in 40 min: ends at 6 h 40 min, 40 min past the limit, rate measured 20 min.
        (reading(10, T0 + 2400, 10 / 2400, 1200), True),
        # the same rate measured over 5 min only: not believed yet (18 min for a 6 h limit).
        (reading(10, T0 + 2400, 10 / 2400, 300), False),
        # 5 min late: inside the 2 % margin (7.2 min).
        (reading(10, T0 + 2400, 90 / (6 * HOUR + 300 - 2400), 1200), False),
        (reading(10, T0 + 2400, 10 / 2000, 1200), False),  # ends in time
        (reading(100, T0 + 2400, 1 / 2400, 1200), False),  # done: nothing to overrun
        (reading(10, T0 + 2400, None, 0), False),  # no rate yet
        (reading(10, T0 + 2400, 10 / 2400, 1200, total=None), False),  # no length known
    ],
)
def test_when_an_overrun_is_believed(r: Reading, over: bool) -> None:
    assert (overrun(r, LIMIT) is not None) is over
    assert overrun(r, None) is None


def test_the_warning_says_how_late_and_what_to_do() -> None:
    r = reading(10, T0 + 2400, 10 / 2400, 1200)
    p = overrun(r, LIMIT)
    assert p is not None and p.over_s == pytest.approx(2400.0)
    text = warning(r, p)
    assert "10% done after 40m00s" in text and "ends 40m00s after its 6h00m time limit" in text
    assert text.endswith("checkpoint, or resubmit with a longer --ttl (and --wall)")
    assert min_span_s(6 * HOUR) == 600.0 and min_span_s(60.0) == 10.0
    assert project(r, LIMIT) is not None and project(None, LIMIT) is None


@pytest.fixture
def ledger(redis_client: redis.Redis, key_prefix: str) -> Iterator[Ledger]:
    yield Ledger(redis_client, FakeClock(T0), Keys(key_prefix), log_maxlen=100)
    for key in redis_client.scan_iter(f"{key_prefix}:*"):
        redis_client.delete(key)


def running_job(ledger: Ledger, notify: tuple[str, ...] = ()) -> str:
    job_id, _ = ledger.create(make_spec(notify=notify))
    assert ledger.claim(job_id, "o", ttl_s=60)
    for st in (S.ALLOCATING, S.STARTING, S.RUNNING):
        ledger.transition(job_id, st, owner="o", reason=st.value)
    return job_id


def watch_with(ledger: Ledger, job_id: str, r: Reading, segment: int = 0) -> dict[str, str]:
    ledger.record_watch(job_id, {
        "segment": str(segment), record.FIELD: record.encode(r),
        "exec_started": repr(LIMIT.started_at), "exec_ttl": repr(LIMIT.ttl_s),
    })  # fmt: skip
    return ledger.read_watch(job_id)


def overruns(ledger: Ledger, job_id: str) -> list[events.Event]:
    return [e for e in events.read(ledger.r, ledger.keys, job=job_id) if e.kind == "overrun"]


def test_the_warning_is_said_once_per_segment_whoever_owns_the_job(
    ledger: Ledger, tmp_path: Path
) -> None:
    job_id = running_job(ledger, notify=("team:SUCCEEDED", "ops:TIMED_OUT"))
    logged: list[str] = []
    told: list[str] = []
    guard = ProgressGuard(ledger, job_id, 0, logged.append, told.append)
    early = reading(1, T0 + 240, 1 / 240, 120)  # not believed yet
    guard(watch_with(ledger, job_id, early))
    assert overruns(ledger, job_id) == [] and told and told[0].startswith("progress: 1% (1/100 it)")
    late = reading(10, T0 + 2400, 10 / 2400, 1200)
    w = watch_with(ledger, job_id, late)
    guard(w)
    guard(w)
    ProgressGuard(ledger, job_id, 0, logged.append)(w)  # an adopter, later
    ProgressGuard(ledger, job_id, 0, logged.append)(ledger.read_watch(job_id))
    got = overruns(ledger, job_id)
    assert len(got) == 1, got
    assert got[0].dst == "running" and "after its 6h00m time limit" in got[0].reason
    assert [line for line in logged if "time limit" in line] == [f"time limit: {got[0].reason}"]
    assert json.loads(ledger.read_watch(job_id)["exec_overrun"])["over_s"] == 2400.0
    assert len(told) == 1  # Flower is told again only after FLOWER_EVERY_S

    # A stale owner's (an older segment's) guard says nothing; the new segment may warn again.
    ledger.start_segment(job_id, "o", 1)
    ProgressGuard(ledger, job_id, 0, logged.append)(watch_with(ledger, job_id, late, segment=1))
    assert len(overruns(ledger, job_id)) == 1
    ProgressGuard(ledger, job_id, 1, logged.append)(watch_with(ledger, job_id, late, segment=1))
    assert len(overruns(ledger, job_id)) == 2

    # The notifier tells the targets that would be told of TIMED_OUT, and no other.
    out = tmp_path / "hook.out"
    hook = tmp_path / "hook.py"
    hook.write_text(
        "import json, os, sys\n"
        f"open({str(out)!r}, 'a').write(json.dumps([json.load(sys.stdin), "
        "os.environ['COLABQ_EVENT_KIND'], sys.argv[1]]) + '\\n')\n"
    )
    file = tmp_path / "webhooks"
    file.write_text(
        f"team = exec {sys.executable} {hook} team\nops = exec {sys.executable} {hook} ops\n"
    )
    file.chmod(0o600)
    notifier = Notifier(ledger, load_targets(file), [], consumer="n1")
    notifier.ensure_group(start="0")
    while notifier.poll(block_ms=200):
        pass
    delivered = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(e["job"], e["kind"], kind, name) for e, kind, name in delivered] == [
        (job_id, "overrun", "overrun", "ops")
    ] * 2


def test_a_fault_is_logged_once_and_never_stops_the_loop(ledger: Ledger) -> None:
    job_id = running_job(ledger)
    logged: list[str] = []

    def broken(text: str) -> None:
        raise RuntimeError("flower is down")

    guard = ProgressGuard(ledger, job_id, 0, logged.append, broken)
    w = watch_with(ledger, job_id, reading(1, T0 + 240, 1 / 240, 120))
    guard(w)
    guard.flower_every_s = 0.0
    guard._told = ""
    guard(w)
    assert logged == ["progress not checked: RuntimeError: flower is down"]
    guard({record.FIELD: "{damaged"})  # a damaged reading is no reading
    assert len(logged) == 1
