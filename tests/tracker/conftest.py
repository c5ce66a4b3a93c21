"""A real `mlflow server` (SQLite backend) for the session, and a ledger with jobs in it.

The server is the one the `mlflow` package ships (the dev extra installs it), started once per
test process on a free port and killed with its whole process group at the end.
"""

from __future__ import annotations

from pathlib import Path

import fakeredis
import pytest

from tests.factories import SESSION, make_spec
from worker.clock import FakeClock
from worker.janitor.run import JanitorReport, Row
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.session.job import RunnerDeps
from worker.session.jobfiles import JobFiles
from worker.session.start import Starting
from worker.settings import Settings
from worker.spec import JobSpec
from worker.states import JobState as S


@pytest.fixture
def ledger() -> Ledger:
    return Ledger(fakeredis.FakeRedis(), FakeClock(), Keys("tq"), log_maxlen=100)


def running_job(ledger: Ledger, spec: JobSpec | None = None, owner: str = "w1") -> JobSpec:
    """A job RUNNING on a VM under `owner`, as a worker leaves it."""
    spec = spec or make_spec()
    job_id, _ = ledger.create(spec)
    assert ledger.claim(job_id, owner, ttl_s=30)
    ledger.transition(job_id, S.ALLOCATING, owner=owner, reason="claimed")
    ledger.set_fields(job_id, owner=owner, endpoint=f"gpu-{job_id}", session=SESSION)
    ledger.transition(job_id, S.STARTING, owner=owner, reason="up")
    ledger.transition(job_id, S.RUNNING, owner=owner, reason="run")
    return spec


def end_job(ledger: Ledger, job_id: str, state: S, reason: str, owner: str = "w1") -> None:
    ledger.transition(job_id, S.RELEASING, owner=owner, reason=f"releasing: {reason}")
    ledger.transition(job_id, state, owner=owner, reason=reason)
    ledger.release_lock(job_id, owner)


def redis_dump(ledger: Ledger) -> str:
    """Every key of the ledger's prefix and every value in it, as one text (for canaries)."""
    r = ledger.r
    out = []
    for key in r.scan_iter(f"{ledger.keys.prefix}*"):
        kind = r.type(key).decode()
        out.append(key.decode())
        if kind == "string":
            out.append(r.get(key).decode(errors="replace"))
        elif kind == "hash":
            out += [f"{k!r}={v!r}" for k, v in r.hgetall(key).items()]
        elif kind == "list":
            out += [repr(v) for v in r.lrange(key, 0, -1)]
        elif kind == "set":
            out += [repr(v) for v in r.smembers(key)]
        elif kind == "zset":
            out += [repr(v) for v in r.zrange(key, 0, -1, withscores=True)]
        elif kind == "stream":
            out += [repr(e) for e in r.xrange(key)]
    return "\n".join(out)


def starting(spec: JobSpec, ledger: Ledger, settings: Settings, tmp_path: Path) -> Starting:
    """The runner's start step for `spec`, owned by "w1" (only what opening a run needs)."""
    deps = RunnerDeps(
        clock=ledger.clock, ledger=ledger, driver=None, store=None,  # type: ignore[arg-type]
        settings=settings, files=JobFiles(tmp_path / spec.job_id).ensure(),
        start_watchdog=lambda files, env: None, check_input=lambda uri: 0,
    )  # fmt: skip
    return Starting(spec, "w1", deps)


def open_for(spec: JobSpec, ledger: Ledger, settings: Settings, tmp_path: Path) -> dict[str, str]:
    run = starting(spec, ledger, settings, tmp_path)
    env = run._tracker_env(ledger.get(spec.job_id))
    run._ship.close()
    return env


def tracker_rows(report: JanitorReport) -> dict[str, Row]:
    return {r.subject: r for r in report.rows if r.kind == "tracker run"}
