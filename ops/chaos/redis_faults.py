"""Redis faults, each on a private redis-server of the group's own with an append-only file
(`tests/integration/test_redis_outage.py`'s `PrivateRedis`), stopped and started around a job:

- `redis-down`: Redis stopped `--outage` s (12) during allocation, upload, run and release.
- `redis-restart-aof`, `redis-restart-empty`: restarted mid-run with its append-only file, and
  without persistence (killed, started empty: every record, lease and queue gone).
- `redis-down-3min` (issue 17's acceptance): stopped `--long-outage` s (180) while a job runs,
  far past the suite's 3 s lease and the 2 s retry budget set here (`REDIS_ENV`), and restarted
  with its data (`tests/integration/test_long_redis_outage.py`): SUCCEEDED, every line once,
  and the job never RUNNING once its VM had ended. The outage's length is the one deliberate
  sleep of the suite.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import partial
from pathlib import Path

from ops.chaos.checks import settle
from ops.chaos.fleet import Group, JobPlan, numbered, wait_until
from ops.chaos.scenarios import (
    POINT_TIMEOUT_S,
    Waiter,
    fault,
    not_over,
    runner_phase,
    states_seen,
)
from tests.integration.test_redis_outage import PrivateRedis
from worker.states import TERMINAL, JobState

S = JobState
Result = tuple[set[str], str, list[str]]
REDIS_OUTAGE_S = 180.0
REDIS_ENV = {"COLABQ_REDIS_RETRY_S": "2"}  # every Redis call's retry budget, scaled as the lease


def _log(g: Group, job_id: str) -> list[str]:
    return [ln.text for ln in g.fleet.ledger.read_log(job_id, count=100_000)]


@contextmanager
def private_redis(root: Path) -> Iterator[PrivateRedis]:
    """A redis-server of the group's own with an append-only file, stopped and started to make
    outages (tests/integration/test_redis_outage.py's)."""
    root.mkdir(parents=True, exist_ok=True)
    with PrivateRedis(root) as r:
        yield r


OUTAGE_POINTS: tuple[tuple[str, Waiter, str | None], ...] = (
    ("allocation", lambda g, j: runner_phase(g, j.job_id) == "allocating", "new"),
    ("upload", lambda g, j: runner_phase(g, j.job_id) == "uploading", "upload"),
    ("mid-run", lambda g, j: "started" in g.fleet.output(j.job_id), None),
    ("release", lambda g, j: S.RELEASING in states_seen(g, j.job_id) and not_over(g, j), "stop"),
)


def redis_outages(g: Group, r: PrivateRedis, seconds: float) -> tuple[set[str], str, list[str]]:
    stuck: set[str] = set()
    notes: list[str] = []
    for name, reached, slow in OUTAGE_POINTS:
        if slow:
            fault(g, slow, delay_s=3, times=1)
        # The idle timeout outlasts the outage, so the job's last lines still reach the log.
        j = g.submit(f"Redis down {seconds:.0f} s at {name}", "sleep 6", idle="20s")
        if not wait_until(partial(reached, g, j), POINT_TIMEOUT_S, 0.02):
            notes.append(f"point not caught: {name}")
        r.outage(seconds).join()
        g.fleet.emu("faults", "clear")
        stuck |= settle(g, [j])
    return stuck, f"4 outages of {seconds:.0f} s", notes


def redis_restart(g: Group, r: PrivateRedis, *, persist: bool) -> tuple[set[str], str, list[str]]:
    """Redis restarted mid-run: with its append-only file it comes back with everything;
    without persistence (killed, started on an empty folder) it comes back empty: every record,
    lease and queue gone."""
    what = "(AOF)" if persist else "(no persistence)"
    j = g.submit(f"Redis restarted {what}", numbered(40), deadline_s=60)
    hit = wait_until(lambda: "line-5" in g.fleet.output(j.job_id), POINT_TIMEOUT_S)
    if persist:
        r.stop()
    else:
        assert r.proc is not None
        r.proc.kill()
        r.proc.wait()
        r.root = r.root / "empty"
        r.root.mkdir()
    r.start()
    stuck = settle(g, [j])
    after = g.submit("after the restart", numbered(5))
    stuck |= settle(g, [after])
    return stuck, "1 restart mid-run, then 1 job", [] if hit else ["point not caught"]


def redis_down_long(g: Group, r: PrivateRedis, outage_s: float = REDIS_OUTAGE_S) -> Result:
    lines = int(outage_s) + 40  # a line a second: still running when Redis returns
    j = g.submit(f"Redis down {outage_s:.0f} s mid-run", numbered(lines, 1.0), idle="20s",
                 deadline_s=lines + 120, lines=lines)  # fmt: skip
    notes = []
    if not wait_until(lambda: "line-10" in g.fleet.output(j.job_id), POINT_TIMEOUT_S):
        notes.append("point not caught: line-10")
    outage = r.outage(outage_s)
    waits = wait_until(lambda: runner_phase(g, j.job_id) == "awaiting_redis", 30, 0.2)
    g.check(waits, "the owner never said it waits for Redis")
    outage.join(timeout=outage_s + 60)
    g.check(not outage.is_alive(), "Redis did not come back")
    _watch_running_without_vm(g, j)
    stuck = settle(g, [j])
    adopted = [t for t in _log(g, j.job_id) if "adopted by" in t]
    notes.extend(f"after the outage: {t}" for t in adopted[:1])
    return stuck, f"1 outage of {outage_s:.0f} s mid-run", notes


def _watch_running_without_vm(g: Group, j: JobPlan, grace_s: float = 15.0) -> None:
    """Until the job is terminal (or past its deadline): RUNNING in the ledger while the
    account's billing says its VM ended, for longer than `grace_s` (a poll and a lease), is a
    job that outlived its VM."""
    since: float | None = None
    deadline = j.submitted_at + j.deadline_s
    while time.monotonic() < deadline:
        state = g.state(j.job_id)
        if state in TERMINAL:
            return
        ended = False
        if state is S.RUNNING:
            with suppress(Exception):
                ep = g.fleet.ledger.get(j.job_id).get("endpoint")
                ended = any(b["endpoint"] == ep and b["unassigned_at"] is not None
                            for b in g.fleet.billing())  # fmt: skip
        if not ended:
            since = None
        elif since is None:
            since = time.monotonic()
        elif time.monotonic() - since > grace_s:
            g.check(False, f"job {j.job_id} RUNNING over {grace_s:.0f} s after its VM ended")
            return
        time.sleep(1.0)
