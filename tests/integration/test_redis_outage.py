"""Redis goes away for 12 s while a job allocates, uploads, runs and persists: every Redis call of
the runner, the attach client and the watchdog rides it out, the job ends right, and the session
is never held idle. The fleet runs on a private redis-server with an append-only file, stopped
(`SHUTDOWN`, connections refused) and started again on the same data, as a restart would."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.integration.conftest import Fleet
from tests.integration.test_run_on_vm import (
    assert_clean,
    assert_held_is_billed,
    submit,
    wait_for,
)
from worker.states import TERMINAL, JobState

pytestmark = pytest.mark.integration
OUTAGE_S = 12.0
# Longer than the outage, so that the job's last lines, printed while Redis is down, are
# forwarded once it is back (with a shorter one the VM is released on time and they live only in
# the store's copy of the log).
IDLE_S = 20.0
POLL_S = 0.5  # the fleet's watchdog poll
EXEC_OVER_GRACE_S = 2.0  # how long a finished attach client waits out an outage


class PrivateRedis:
    def __init__(self, root: Path) -> None:
        self.root = root
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--dir",
             str(self.root), "--appendonly", "yes", "--appendfsync", "always", "--save", ""],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis.from_url(self.url)
        wait_for(lambda: _pings(client), "the private redis-server", 10)

    def stop(self) -> None:
        """A clean stop: the append-only file keeps everything; clients are refused."""
        with contextlib.suppress(redis.ConnectionError):  # it closes the connection as it goes
            redis.Redis.from_url(self.url).shutdown(nosave=False)
        assert self.proc is not None
        self.proc.wait(timeout=10)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> PrivateRedis:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def outage(self, seconds: float) -> threading.Thread:
        def run() -> None:
            self.stop()
            time.sleep(seconds)
            self.start()

        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


@pytest.fixture
def private_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateRedis]:
    with PrivateRedis(tmp_path_factory.mktemp("redis")) as r:
        yield r


@pytest.fixture
def redis_url(private_redis: PrivateRedis) -> str:
    return private_redis.url


def phase(fleet: Fleet, job_id: str) -> str | None:
    try:
        return str(json.loads((fleet.job_dir(job_id) / "runner.json").read_text())["phase"])
    except (OSError, ValueError, KeyError):
        return None


@pytest.mark.parametrize("during", ["allocation", "upload", "run", "persist"])
def test_redis_down_12s_the_job_ends_right_and_no_session_idles(
    fleet: Fleet, private_redis: PrivateRedis, during: str
) -> None:
    slow = {"allocation": "new", "upload": "upload", "persist": "stop"}.get(during)
    if slow:
        fleet.emu("faults", "set", slow, json.dumps({"delay_s": 3, "times": 1}))
    job_id = submit(
        fleet, "echo started\nsleep 8\necho finished\n", "--idle", f"{IDLE_S:.0f}s", wall="10m"
    )
    if during == "allocation":
        wait_for(lambda: phase(fleet, job_id) == "allocating", "allocating")
    elif during == "upload":
        wait_for(lambda: phase(fleet, job_id) == "uploading", "uploading")
    elif during == "run":
        wait_for(lambda: "started" in fleet.output(job_id), "the job running")
    else:
        # Persisting and releasing overlap (the session is stopped, slowly here, while the
        # store verifies): the outage hits both.
        wait_for(
            lambda: JobState.PERSISTING in [h.state for h in fleet.ledger.history(job_id)],
            "persisting",
        )
        assert fleet.ledger.get(job_id).state not in TERMINAL
    private_redis.outage(OUTAGE_S).join()
    assert fleet.wait_terminal(job_id, timeout_s=90) is JobState.SUCCEEDED, fleet.ledger.get(
        job_id
    ).reason
    assert [ln for ln in fleet.output(job_id)] == ["started", "finished"]
    # The session was held only while the job needed it: released within the idle timeout and
    # a poll of the job's end, whatever Redis did.
    [assignment] = fleet.billing()
    finished = float(fleet.ledger.read_watch(job_id)["exec_finished"])
    held_s = float(str(assignment["unassigned_at"])) - finished
    assert held_s <= IDLE_S + POLL_S + EXEC_OVER_GRACE_S, held_s
    # What the report charges is what was billed; an outage over the release can only delay
    # the recorded stop (the clock runs on until Redis takes the transition).
    assert_held_is_billed(fleet, job_id, assignments=1, slack_s=OUTAGE_S)
    assert_clean(fleet, job_id)
