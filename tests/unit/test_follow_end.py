"""The owner's follow loop ends when the job's end was forwarded: the attach's END, or the
wrapper's DONE alone (a client cut off between the two forwarded every line before DONE; a new
attach would only wait for the wrapper to exit)."""

from __future__ import annotations

from pathlib import Path

import fakeredis
import pytest

from tests.factories import make_spec
from worker.clock import FakeClock
from worker.records.forward import ForwardItem
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.session.attach import AttachSpec
from worker.session.follow import Ended, Follower
from worker.session.jobfiles import JobFiles


def follower(ledger: Ledger, job_id: str, root: Path, spawned: list[object]) -> Follower:
    def spawn(*args: object) -> object:
        spawned.append(args)
        raise AssertionError("no attach client is needed")

    return Follower(
        job_id=job_id, session="s", files=JobFiles(root).ensure(), ledger=ledger,
        driver=None,  # type: ignore[arg-type]
        clock=ledger.clock, spawn=spawn, env={},  # type: ignore[arg-type]
        attach=AttachSpec(job_id, "s", "n", 0, "colab", "c", 1.0), deadline_at=1e12, poll_s=0.1,
        backoff_max_s=1.0, fence=lambda: None, log=lambda text: None, cancelled=lambda: None,
    )  # fmt: skip


@pytest.mark.parametrize(
    "items",
    [
        [
            ForwardItem(7, "l", "line-1"),
            ForwardItem(20, "s", "DONE=0"),
            ForwardItem(20, "e", "END=20"),
        ],
        [ForwardItem(7, "l", "line-1"), ForwardItem(20, "s", "DONE=0")],  # END cut off
    ],
    ids=["end", "done only"],
)
def test_the_job_s_end_forwarded_ends_the_loop(tmp_path: Path, items: list[ForwardItem]) -> None:
    ledger = Ledger(fakeredis.FakeRedis(), FakeClock(), Keys("t"), log_maxlen=100)
    job_id, _ = ledger.create(make_spec())
    ledger.record_watch(job_id, {"segment": "0"})
    ledger.forward(job_id, 0, items)
    spawned: list[object] = []
    got = follower(ledger, job_id, tmp_path, spawned).run()
    assert got.ended is Ended.JOB_ENDED and spawned == []


def test_lines_without_the_end_do_not_end_the_loop(tmp_path: Path) -> None:
    ledger = Ledger(fakeredis.FakeRedis(), FakeClock(), Keys("t"), log_maxlen=100)
    job_id, _ = ledger.create(make_spec())
    ledger.record_watch(job_id, {"segment": "0"})
    ledger.forward(job_id, 0, [ForwardItem(7, "l", "line-1"), ForwardItem(20, "s", "EXIT=0")])
    spawned: list[object] = []
    with pytest.raises(AssertionError, match="no attach client"):
        follower(ledger, job_id, tmp_path, spawned).run()
    assert len(spawned) == 1  # it went on to attach
