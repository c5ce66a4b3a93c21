"""`colabq status` with a run's progress (issue 27), on the real Redis: the list's progress column
(fraction, rate, ETA in local time, `!` past the time limit) in 80 columns, an ended job's last
fraction, `status JOB` in words and `--json` as data, the Python API's `JobInfo.progress`, and a
damaged reading shown as none, never as a crash."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
import redis

from colabq import Client, RunProgress
from tests.cli.test_status import create, drive, rows_of, status
from worker.clock import SystemClock
from worker.progress import record
from worker.progress.record import Reading
from worker.progress.words import local_time
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.settings import load_settings
from worker.states import JobState as S


@pytest.fixture
def env(redis_url: str, key_prefix: str, tmp_path: Path) -> dict[str, str]:
    return {"COLABQ_REDIS_URL": redis_url, "COLABQ_KEY_PREFIX": key_prefix,
            "HOME": str(tmp_path), "COLUMNS": "80"}  # fmt: skip


@pytest.fixture
def ledger(redis_client: redis.Redis, key_prefix: str) -> Iterator[Ledger]:
    yield Ledger(redis_client, SystemClock(), Keys(key_prefix), log_maxlen=1000)
    for key in redis_client.scan_iter(f"{key_prefix}:*"):
        redis_client.delete(key)


def store(ledger: Ledger, job_id: str, r: Reading | str, ttl_s: float = 3600.0) -> None:
    ledger.record_watch(job_id, {
        record.FIELD: r if isinstance(r, str) else record.encode(r),
        "exec_started": repr(r.first_at if isinstance(r, Reading) else time.time()),
        "exec_ttl": repr(ttl_s),
    })  # fmt: skip


def running(ledger: Ledger, **spec: object) -> str:
    job_id = create(ledger, **spec)
    drive(ledger, job_id, S.ALLOCATING, S.STARTING, S.RUNNING)
    return job_id


def reading(done: float, rate: float, *, ago_s: float = 5.0, span_s: float = 600.0) -> Reading:
    now = time.time()
    return Reading(now - ago_s, done, 100.0, "it", "tqdm", rate, span_s, now - 900, 0.0)


def local_hhmm(at: float) -> str:
    """As the list shows it: `14:32` today, `Tue 00:03` when that is tomorrow already."""
    moment, today = datetime.fromtimestamp(at).astimezone(), datetime.now().astimezone()
    return moment.strftime("%H:%M" if moment.date() == today.date() else "%a %H:%M")


def test_the_list_shows_fraction_rate_and_eta_in_80_columns(
    env: dict[str, str],
    ledger: Ledger,
) -> None:
    on_time = running(ledger)
    late = running(ledger)
    ended = create(ledger)
    drive(ledger, ended, S.ALLOCATING, S.STARTING, S.RUNNING, S.RELEASING, S.TIMED_OUT)
    quiet = running(ledger)  # a job whose console said no progress
    fine = reading(45, 0.2)
    store(ledger, on_time, fine, ttl_s=3600)
    store(ledger, late, reading(10, 0.01), ttl_s=1200)  # ends in ~2.5 h, limit in 5 min
    store(ledger, ended, reading(87, 0.1))
    out = status(env)
    assert out.exit_code == 0, out.output
    assert max(len(line) for line in out.output.splitlines()) <= 80
    assert out.output.splitlines()[0].split()[-1] == "progress"
    rows = {line.split()[0]: line for line in rows_of(out.output)}
    assert f"45% 0.2it/s {local_hhmm(fine.eta_at or 0)}" in rows[on_time[:6]]
    assert rows[late[:6]].rstrip().endswith("!")  # projected past its time limit
    assert rows[ended[:6]].rstrip().endswith("87%")  # how far it got
    assert rows[quiet[:6]].rstrip().endswith("-")
    listed = {r["job_id"]: r for r in json.loads(status(env, "--json").stdout)}
    assert listed[on_time]["progress"]["fraction"] == 0.45
    assert listed[late]["progress"]["projected_overrun"] is True
    assert listed[quiet]["progress"] is None


def test_one_job_in_words_as_json_and_from_python(
    env: dict[str, str],
    ledger: Ledger,
    redis_url: str,
    key_prefix: str,
) -> None:
    job_id = running(ledger)
    r = reading(45, 0.2)
    store(ledger, job_id, r)
    page = status(env, job_id).output
    assert f"45% (45/100 it), 0.2 it/s, ETA {local_time(r.eta_at or 0, time.time())}" in page
    data = json.loads(status(env, job_id, "--json").stdout)["progress"]
    assert data["fraction"] == 0.45 and data["rate_per_s"] == 0.2 and data["unit"] == "it"
    assert data["eta_at"] == pytest.approx(r.eta_at, abs=0.01)  # (stored to the millisecond)
    assert data["projected_overrun"] is False
    assert data["time_limit_at"] == pytest.approx(r.first_at + 3600)
    client = Client(settings=load_settings(redis_url=redis_url, key_prefix=key_prefix))
    got = client.status(job_id).progress
    assert isinstance(got, RunProgress) and got.fraction == 0.45
    assert got.eta_at == pytest.approx(r.eta_at, abs=0.01)
    assert got.over_limit_s is not None and got.over_limit_s < 0


def test_a_damaged_reading_is_no_reading(
    env: dict[str, str],
    ledger: Ledger,
) -> None:
    job_id = running(ledger)
    store(ledger, job_id, '{"v": 1, "at": "soon", "done": -3}')
    out = status(env)
    assert out.exit_code == 0 and "progress" not in out.output.splitlines()[0]
    assert json.loads(status(env, job_id, "--json").stdout)["progress"] is None
    assert "progress" not in status(env, job_id).output
