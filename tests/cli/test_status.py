"""`colabq status` against the real Redis: the list in 80 columns, its filters and pages, a
damaged record among good ones, `status JOB`'s exit code for every outcome, `--json` named like
the table's columns, the live view, and an import path without Celery or the session code."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from producer import exitcodes
from producer.cli import app
from producer.joblist import whoami
from producer.render import LIST_COLUMNS
from tests.factories import make_spec
from worker.clock import FakeClock
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.spec import Gpu
from worker.states import JobState as S

runner = CliRunner()
FOOTER = re.compile(r"^(\d+-\d+ of \d+ matched|Next page: |Page \d+ is past)")
WEEK_S = 7 * 86400
ROOT = Path(__file__).resolve().parents[2]
OWNER = "w1"
LONG_RUN = "coco-resnet50-bs256-lr3e-4-warmup5-cosine-ema-mixup-cutmix-randaug-long-schedule"
LONG_WORKER = "celery@gpu-worker-host-number-seventeen.cluster.example.org"

# Every way a job ends, the path it takes there, and the code `status JOB` exits with.
ENDINGS = [
    (S.SUCCEEDED, (S.ALLOCATING, S.STARTING, S.RUNNING, S.RELEASING), exitcodes.OK),
    (S.FAILED, (S.ALLOCATING, S.STARTING, S.RUNNING, S.RELEASING), exitcodes.FAILED),
    (S.TIMED_OUT, (S.ALLOCATING, S.STARTING, S.RUNNING, S.RELEASING), exitcodes.TIMED_OUT),
    (S.CANCELLED, (S.ALLOCATING,), exitcodes.CANCELLED),
    (S.FAILED_NO_GPU, (S.ALLOCATING,), exitcodes.NO_CAPACITY),
    (S.FAILED_BUDGET, (S.ALLOCATING,), exitcodes.NO_CAPACITY),
    (S.FAILED_LOST, (S.ALLOCATING, S.STARTING), exitcodes.LOST),
    (S.VM_LOST, (S.ALLOCATING, S.STARTING, S.RUNNING, S.RELEASING), exitcodes.LOST),
]


@pytest.fixture
def env(redis_url: str, key_prefix: str, tmp_path: Path) -> dict[str, str]:
    return {
        "COLABQ_REDIS_URL": redis_url,
        "COLABQ_KEY_PREFIX": key_prefix,
        "HOME": str(tmp_path),
        "COLUMNS": "80",
    }


@pytest.fixture
def clock() -> FakeClock:
    """The ledger's clock, a week back: a test moves it forward, never past the real now
    (which `colabq status` reads)."""
    return FakeClock(time.time() - WEEK_S)


def back_to(clock: FakeClock, seconds_ago: float) -> None:
    clock.advance(time.time() - seconds_ago - clock.time())


@pytest.fixture
def ledger(redis_client: redis.Redis, key_prefix: str, clock: FakeClock) -> Iterator[Ledger]:
    yield Ledger(redis_client, clock, Keys(key_prefix), log_maxlen=1000)
    for key in redis_client.scan_iter(f"{key_prefix}:*"):
        redis_client.delete(key)


def status(env: dict[str, str], *args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["status", *args], env=env)


def create(ledger: Ledger, **spec: object) -> str:
    job_id, created = ledger.create(make_spec(**spec))
    assert created
    return job_id


def drive(ledger: Ledger, job_id: str, *states: S, worker: str = "celery@gpu1") -> None:
    """Through `states` as the job's owner would; the endpoint recorded as `colab new` returns."""
    if not ledger.get(job_id).owner:
        assert ledger.claim(job_id, OWNER, ttl_s=600)
    for st in states:
        ledger.transition(job_id, st, owner=OWNER, reason=f"now {st.value}")
        if st is S.ALLOCATING:
            ledger.set_fields(job_id, owner=OWNER, worker=worker, endpoint=f"gpu-{job_id}")


def rows_of(output: str) -> list[str]:
    """The table's job lines (after the header rule, before the footer)."""
    lines = output.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("──"))
    return [line for line in lines[rule + 1 :] if line and not FOOTER.match(line)]


def test_the_list_fits_80_columns_one_line_per_job(
    env: dict[str, str], ledger: Ledger, clock: FakeClock
) -> None:
    ids = []
    paths = [
        (S.ALLOCATING, S.RELEASING, S.FAILED_NO_GPU),  # the widest states
        (S.ALLOCATING, S.FAILED_BUDGET),
        (S.ALLOCATING, S.STARTING, S.RUNNING),
        (S.ALLOCATING, S.STARTING, S.RUNNING),
    ]
    for i, path in enumerate(paths):
        job_id = create(ledger, run_name=f"{LONG_RUN}-{i}", gpu=Gpu.A100)
        drive(ledger, job_id, *path, worker=LONG_WORKER)
        ids.append(job_id)
        clock.advance(86400 + 7)  # elapsed in days for the oldest
    result = status(env)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    rows = rows_of(result.output)
    assert len(rows) == len(ids)
    for line, job_id in zip(rows, reversed(ids), strict=True):  # newest first
        assert line.split()[0] == job_id[:6]  # the short id, whole (never folded)
        assert "…" in line  # the long run name cut, not wrapped
        assert any(st in line for st in ("FAILED_NO_GPU", "FAILED_BUDGET", "RUNNING"))
    assert lines[0].split() == list(LIST_COLUMNS)
    assert "1-4 of 4 matched" in result.output


def test_short_ids_grow_until_unique(env: dict[str, str], ledger: Ledger) -> None:
    twins = [create(ledger, job_id="abcdef0123" + tail) for tail in ("45", "99")]
    result = status(env)
    firsts = [line.split()[0] for line in rows_of(result.output)]
    assert sorted(firsts) == ["abcdef01234", "abcdef01239"]
    for short, job_id in zip(sorted(firsts), twins, strict=True):
        assert status(env, short, "--json").exit_code == exitcodes.NOT_OVER
        assert json.loads(status(env, short, "--json").stdout)["job_id"] == job_id


def test_filters_by_state_group_run_since_and_submitter(
    env: dict[str, str], ledger: Ledger, clock: FakeClock
) -> None:
    old = create(ledger, run_name="detr-r50-old", submitted_by="someone@else")
    drive(ledger, old, S.ALLOCATING, S.RELEASING, S.FAILED)
    back_to(clock, 3600)
    running = create(ledger, run_name="coco-r50-a", submitted_by=whoami())
    drive(ledger, running, S.ALLOCATING, S.STARTING, S.RUNNING)
    queued = create(ledger, run_name="coco-r50-b", submitted_by="someone@else")
    done = create(ledger, run_name="mnist-mlp", submitted_by=whoami())
    drive(ledger, done, S.ALLOCATING, S.STARTING, S.RUNNING, S.RELEASING, S.SUCCEEDED)

    def listed(*args: str) -> set[str]:
        result = status(env, *args, "--json")
        assert result.exit_code == 0, result.output
        return {row["job_id"] for row in json.loads(result.stdout)}

    assert listed() == {old, running, queued, done}
    assert listed("--state", "running") == {running}
    assert listed("--state", "RUNNING", "--state", "Queued") == {running, queued}
    assert listed("--state", "live") == {running, queued}
    assert listed("--state", "ended") == {old, done}
    assert listed("--state", "failed") == {old}
    assert listed("--run", "coco-*") == {running, queued}
    assert listed("--since", "1d") == {running, queued, done}
    assert listed("--mine") == {running, done}
    assert listed("--mine", "--state", "live", "--run", "coco-*", "--since", "2h") == {running}
    bad = status(env, "--state", "runing")
    assert bad.exit_code == exitcodes.BAD_INPUT and "not a state" in bad.output


def test_pages_newest_first_with_a_footer(
    env: dict[str, str], ledger: Ledger, clock: FakeClock
) -> None:
    ids = []
    for i in range(7):
        ids.append(create(ledger, run_name=f"sweep-lr-{i}"))
        clock.advance(1)
    newest = list(reversed(ids))
    pages = []
    for page in (1, 2, 3):
        result = status(env, "--limit", "3", "--page", str(page), "--json")
        pages.append([row["job_id"] for row in json.loads(result.stdout)])
    assert pages == [newest[0:3], newest[3:6], newest[6:7]]
    first = status(env, "--limit", "3").output
    assert "1-3 of 7 matched" in first
    assert "colabq status --limit 3 --page 2" in first
    last = status(env, "--limit", "3", "--page", "3").output
    assert "7-7 of 7 matched" in last and "Next page" not in last
    past = status(env, "--limit", "3", "--page", "4")
    assert past.exit_code == 0 and "past the end" in past.output
    assert status(env, "--limit", "0").exit_code == exitcodes.BAD_INPUT


def test_a_damaged_record_never_hides_the_others(
    env: dict[str, str], ledger: Ledger, redis_client: redis.Redis
) -> None:
    good = create(ledger, run_name="good-run")
    bad_state = create(ledger, run_name="bad-state-run", gpu=Gpu.H100)
    bad_spec = create(ledger, run_name="bad-spec-run")
    no_created = create(ledger, run_name="no-created-run")
    keys = ledger.keys
    redis_client.hset(keys.job(bad_state), "state", "exploded")
    # An old record (no summary fields) whose spec is not JSON.
    redis_client.hdel(keys.job(bad_spec), "run_name", "gpu", "user")
    redis_client.hset(keys.job(bad_spec), "spec", "{not json")
    redis_client.hdel(keys.job(no_created), "created_at")

    result = status(env, "--json")
    assert result.exit_code == 0, result.output
    rows = {row["job_id"]: row for row in json.loads(result.stdout)}
    assert rows[good]["state"] == "queued" and rows[good]["problem"] is None
    assert rows[bad_state]["state"] == "damaged" and "exploded" in rows[bad_state]["problem"]
    assert rows[bad_state]["gpu"] == "H100" and rows[bad_state]["run"] == "bad-state-run"
    assert rows[bad_spec]["state"] == "damaged" and "spec" in rows[bad_spec]["problem"]
    assert rows[no_created]["state"] == "damaged" and rows[no_created]["elapsed_s"] is None
    table = status(env)
    assert table.exit_code == 0 and table.output.count("DAMAGED") == 3
    # A key of another type where a record should be: listed as damaged, the rest unharmed.
    wrong = create(ledger, run_name="wrong-type")
    redis_client.delete(keys.job(wrong))
    redis_client.set(keys.job(wrong), "not a hash")
    rows = {row["job_id"]: row for row in json.loads(status(env, "--json").stdout)}
    assert rows[wrong]["state"] == "damaged" and "WRONGTYPE" in rows[wrong]["problem"]
    assert rows[good]["state"] == "queued"
    assert wrong not in status(env, "--state", "queued", "--json").stdout
    one = status(env, wrong)
    assert one.exit_code == exitcodes.FAILED and "damaged (WRONGTYPE" in one.output
    # A record that expired while the index still names it is simply not listed.
    redis_client.delete(keys.job(good))
    for args in ((), ("--state", "queued"), ("--run", "*"), ("--state", "damaged")):
        listed = json.loads(status(env, *args, "--json").stdout)
        assert good not in {row["job_id"] for row in listed}, args
    damaged = {
        row["job_id"] for row in json.loads(status(env, "--state", "damaged", "--json").stdout)
    }
    assert damaged == {bad_state, bad_spec, no_created, wrong}

    for job_id in (bad_state, bad_spec):
        one = status(env, job_id)
        assert one.exit_code == exitcodes.FAILED
        lines = one.output.strip().splitlines()
        assert len(lines) == 1 and "damaged" in lines[0] and "Traceback" not in one.output
        assert lines[0].startswith("colabq: ") and keys.job(job_id) in lines[0]


@pytest.mark.parametrize(("end", "path", "code"), ENDINGS, ids=[e[0].name for e in ENDINGS])
def test_status_job_exits_as_the_job_ended(
    env: dict[str, str], ledger: Ledger, end: S, path: tuple[S, ...], code: int
) -> None:
    job_id = create(ledger)
    drive(ledger, job_id, *path, end)
    for args in ((job_id,), (job_id, "--json")):
        result = status(env, *args)
        assert result.exit_code == code, result.output


def test_status_of_a_live_job_exits_not_over(env: dict[str, str], ledger: Ledger) -> None:
    queued = create(ledger)
    running = create(ledger)
    drive(ledger, running, S.ALLOCATING, S.STARTING, S.RUNNING)
    for job_id in (queued, running):
        assert status(env, job_id).exit_code == exitcodes.NOT_OVER


def test_json_names_are_the_tables_columns(env: dict[str, str], ledger: Ledger) -> None:
    create(ledger)
    header = status(env).output.splitlines()[0].split()
    row = json.loads(status(env, "--json").stdout)[0]
    assert header == list(LIST_COLUMNS)
    for column in header:
        assert column in row or f"{column}_s" in row, column
    assert set(row) >= {"id", "job_id", "run", "state", "gpu", "worker", "elapsed_s", "cu"}


def test_status_job_json_keeps_its_fields_and_adds_the_costs(
    env: dict[str, str], ledger: Ledger, clock: FakeClock
) -> None:
    back_to(clock, 3600)
    job_id = create(ledger, gpu=Gpu.T4)
    drive(ledger, job_id, S.ALLOCATING)
    clock.advance(1800)  # an hour ago `colab new` returned: an hour on a T4 by now
    drive(ledger, job_id, S.STARTING, S.RUNNING)
    time.sleep(0.01)
    data = json.loads(status(env, job_id[:8], "--json").stdout)
    for key in ("job_id", "run_name", "gpu", "state", "terminal", "reason", "updated_at",
                "session", "endpoint", "exit_code", "waivers", "preflight_digest", "history",
                "report"):  # fmt: skip
        assert key in data, key
    assert data["job_id"] == job_id and data["id"] == job_id[:6]
    assert [h["state"] for h in data["history"]] == ["queued", "allocating", "starting", "running"]
    assert data["held_s"] >= 3600 and data["rate_per_hour"] == 1.76
    assert 1.76 <= data["cu"] < 1.77
    listed = json.loads(status(env, "--json").stdout)[0]
    assert 1.76 <= listed["cu"] < 1.77 and listed["worker"] == "celery@gpu1"
    detail = status(env, job_id).output
    assert "gpu held" in detail and "1h00m" in detail and "T4 at 1.76/h" in detail


def test_an_ambiguous_prefix_lists_the_candidates(env: dict[str, str], ledger: Ledger) -> None:
    a = create(ledger, job_id="feedbeef01", run_name="run-a")
    b = create(ledger, job_id="feedbeef02", run_name="run-b")
    result = status(env, "feedbeef")
    assert result.exit_code == exitcodes.NO_SUCH_JOB
    assert a in result.output and b in result.output and "Traceback" not in result.output


def _spawn(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "producer.cli", "status", *args],
        env={**os.environ, **env}, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def test_watching_the_list_redraws_until_ctrl_c_then_exits_0(
    env: dict[str, str], ledger: Ledger
) -> None:
    short = create(ledger, run_name="watched-run")[:6].encode()
    main, tty = pty.openpty()  # a terminal, as a user watches it
    proc = subprocess.Popen(
        [sys.executable, "-m", "producer.cli", "status", "--watch", "--every", "0.1"],
        env={**os.environ, **env, "TERM": "xterm"}, cwd=ROOT, stdin=subprocess.DEVNULL,
        stdout=tty, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    os.close(tty)
    seen = b""
    deadline = time.monotonic() + 60
    while seen.count(short) < 3 and time.monotonic() < deadline:  # drawn, then redrawn
        if select.select([main], [], [], 0.5)[0]:
            seen += os.read(main, 65536)
    assert seen.count(short) >= 3, seen.decode(errors="replace")
    # Keep reading the terminal until the process is gone: a full terminal buffer would block
    # its last redraw (a real terminal always reads).
    draining = threading.Thread(target=_drain, args=(main, proc), daemon=True)
    draining.start()
    proc.send_signal(signal.SIGINT)
    try:
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        draining.join(timeout=5)
        os.close(main)
    assert code == 0
    assert proc.stderr is not None and "Traceback" not in proc.stderr.read()


def _drain(fd: int, proc: subprocess.Popen[str]) -> None:
    while proc.poll() is None:
        with contextlib.suppress(OSError, ValueError):
            if select.select([fd], [], [], 0.2)[0]:
                os.read(fd, 65536)


def test_watching_a_job_ends_with_it_and_its_exit_code(env: dict[str, str], ledger: Ledger) -> None:
    job_id = create(ledger)
    drive(ledger, job_id, S.ALLOCATING, S.STARTING, S.RUNNING)
    proc = _spawn(env, job_id, "--watch", "--every", "0.1")
    time.sleep(2)
    assert proc.poll() is None, proc.communicate()
    drive(ledger, job_id, S.RELEASING, S.TIMED_OUT)
    stdout, stderr = proc.communicate(timeout=20)
    assert proc.returncode == exitcodes.TIMED_OUT, stderr
    assert "TIMED_OUT" in stdout


def test_status_imports_neither_celery_nor_the_session_code(
    env: dict[str, str], ledger: Ledger
) -> None:
    job_id = create(ledger)
    probe = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from producer.cli import app\n"
        "for args in (['status'], ['status', sys.argv[1]]):\n"
        "    CliRunner().invoke(app, args)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'celery'\n"
        "             or m.startswith(('worker.session', 'worker.deps')))\n"
        "print(bad)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, job_id], env={**os.environ, **env}, cwd=ROOT,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
