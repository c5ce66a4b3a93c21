"""A job stopped by its own time limit ends TIMED_OUT (exit code 5), never FAILED.

Given the wrapper run as on a VM, a job `timeout` stops at its TTL prints the TIME_LIMIT sentinel
and one that exits 124 by itself does not; given that sentinel in the watch record, the runner's
persisting step and the janitor's settlement end the job TIMED_OUT; the pre-flight's ETA check
judges the run against the time limit, not the whole wall cap.
"""

from __future__ import annotations

import shutil
import subprocess
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

import fakeredis
import pytest

from producer import exitcodes
from producer.preflight.eta import check_eta
from producer.preflight.report import Verdict
from producer.render import final_report, job_json
from tests.factories import make_spec
from tests.reachable import reachable_folder
from worker.clock import FakeClock
from worker.janitor.settle import settle_outcome
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.session.finish import Finishing
from worker.session.job import Finish
from worker.states import JobState
from worker.store.artifacts import Verification
from worker.timelimit import default_ttl_s, limits_text

VM = Path(__file__).resolve().parents[2] / "worker" / "vm"
TOKYO = ZoneInfo("Asia/Tokyo")


def run_wrapper(tmp_path: Path, script: str, ttl_s: int) -> str:
    """The wrapper as the launch cell starts it, with a local store: its console output. The
    job's folder is one every user reaches (run as root, the wrapper runs the job as another)."""
    with reachable_folder("colabq-ttl-") as folder:
        root, store = folder / "content", tmp_path / "store"
        root.mkdir()
        store.mkdir()
        for name in ("colabq_sync.py", "colabq_tree.py"):
            shutil.copy(VM / name, root)
        (root / "job.sh").write_text(script)
        argv = [
            "bash", str(VM / "colab-job.sh"), "--job", "j1", "--nonce", "N", "--ttl", str(ttl_s),
            "--dest-kind", "local", "--dest-repo", str(store), "--prefix", "p",
            "--heartbeat-s", "1", "--sync-interval", "600", "--", "bash", str(root / "job.sh"),
        ]  # fmt: skip
        done = subprocess.run(
            argv, cwd=root, capture_output=True, text=True, timeout=60, check=False
        )
        return done.stdout


def test_the_wrapper_reports_a_job_timeout_stopped_at_its_limit(tmp_path: Path) -> None:
    console = run_wrapper(tmp_path, "echo start\nsleep 30\n", ttl_s=1)
    assert "__COLABQ_N_EXIT__=124" in console
    assert "__COLABQ_N_TIME_LIMIT__=1" in console
    assert "time limit of 1s ran out" in console


def test_a_job_exiting_124_by_itself_is_not_timed_out(tmp_path: Path) -> None:
    console = run_wrapper(tmp_path, "exit 124\n", ttl_s=30)
    assert "__COLABQ_N_EXIT__=124" in console
    assert "TIME_LIMIT" not in console


class _Store:
    def __init__(self, v: Verification) -> None:
        self.v = v

    def verify(self, spec: Any) -> Verification:
        return self.v

    def location(self, spec: Any) -> str:
        return "here"


def _persisted(watch: dict[str, str], ok: bool = True) -> Finish:
    """What the runner's persisting step ends a job with, given what its VM reported."""
    ledger = Ledger(fakeredis.FakeRedis(), FakeClock(1000.0), Keys("t"), log_maxlen=100)
    spec = make_spec(wall_cap_s=300.0)
    ledger.create(spec)
    ledger.record_watch(spec.job_id, watch)
    v = Verification(ok, 124, ("results",) if ok else (), () if ok else ("results",), "missing")
    deps = SimpleNamespace(ledger=ledger, store=_Store(v), files=None)
    run = Finishing.__new__(Finishing)
    run.spec, run.d, run.job_id, run.exit_code = spec, deps, spec.job_id, 124
    run.log = lambda text: None  # type: ignore[method-assign]
    with pytest.raises(Finish) as ended:
        run._persist(ledger.get(spec.job_id))
    return ended.value


def test_the_runner_ends_a_job_stopped_at_its_time_limit_timed_out() -> None:
    ended = _persisted({"exec_exit": "124", "exec_time_limit": "150"})
    assert ended.state is JobState.TIMED_OUT
    assert "time limit 2m30s ran out" in ended.reason and "wall cap 5m00s" in ended.reason
    assert exitcodes.for_state(ended.state) == exitcodes.TIMED_OUT == 5


def test_timed_out_even_when_its_artifacts_are_missing() -> None:
    ended = _persisted({"exec_exit": "124", "exec_time_limit": "150"}, ok=False)
    assert ended.state is JobState.TIMED_OUT and "missing" in ended.reason


def test_the_runner_ends_a_job_that_exited_124_itself_failed() -> None:
    assert _persisted({"exec_exit": "124"}).state is JobState.FAILED


@pytest.mark.parametrize(
    ("watch", "state"),
    [
        ({"exec_exit": "124", "exec_time_limit": "150"}, JobState.TIMED_OUT),
        ({"exec_exit": "124"}, JobState.FAILED),
    ],
)
def test_the_janitor_settles_a_timed_out_job_timed_out(
    watch: dict[str, str], state: JobState
) -> None:
    spec = make_spec(wall_cap_s=300.0)
    rec = SimpleNamespace(spec=spec, get=lambda k: "1.2.3.4" if k == "endpoint" else None)
    v = Verification(True, 124, ("results",), (), "")
    s = settle_outcome(rec, {**watch, "gone_verified_at": "1"}, lambda _: v)  # type: ignore[arg-type]
    assert s is not None and s.state is state


def test_status_and_the_report_show_the_time_limit_beside_the_wall_cap() -> None:
    ledger = Ledger(fakeredis.FakeRedis(), FakeClock(1000.0), Keys("t"), log_maxlen=100)
    spec = make_spec(wall_cap_s=300.0)
    ledger.create(spec)
    data = job_json(ledger.get(spec.job_id), [])
    assert data["time_limit_s"] == spec.ttl_s == 150 and data["wall_cap_s"] == 300
    assert limits_text(spec) == "time limit 2m30s (wall cap 5m00s)"
    table = final_report({"outcome": "TIMED_OUT", "time_limit_s": 150, "wall_cap_s": 300})
    cells = [str(c) for col in table.columns for c in col._cells]
    assert "time limit 2m30s (wall cap 5m00s)" in cells


@pytest.mark.parametrize(
    ("train_s", "verdict"),
    [(240, Verdict.FAIL), (150, Verdict.PASS)],  # inside --wall 5m the job has 150 s
)
def test_the_eta_is_judged_against_the_jobs_time_limit(train_s: int, verdict: Verdict) -> None:
    finding = check_eta(
        epochs=train_s / 10,
        seconds_per_epoch=10,
        now=datetime(2026, 5, 12, 9, tzinfo=TOKYO),
        zone=TOKYO,
        wall_cap_s=300,
        time_limit_s=default_ttl_s(300),
    )
    assert finding.verdict is verdict
    if verdict is Verdict.FAIL:
        assert "exceeds the job's time limit of 2m30s inside its 5m00s wall cap" in finding.saw
