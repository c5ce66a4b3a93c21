"""Notifications on the real Redis (a private key prefix): events appended by real ledger
transitions, consumed by the notifier in-process; a local HTTP server refuses a webhook twice
(HTTP 500) then accepts it; a command hook gets the event as JSON; exactly the states asked for;
the URL nowhere in Redis; the targets file must be 0600."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import redis

from tests.factories import make_spec
from worker.clock import SystemClock
from worker.errors import UserInputError
from worker.metrics.counts import read_counts
from worker.notify.consumer import Notifier
from worker.notify.deliver import DeliveryFailed, deliver
from worker.notify.targets import Target, load_targets, parse_notify
from worker.records import events
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.states import TERMINAL
from worker.states import JobState as S

SUCCESS = [S.ALLOCATING, S.STARTING, S.RUNNING, S.PERSISTING, S.RELEASING, S.SUCCEEDED]


class Hooks:
    def __init__(self) -> None:
        self.bodies: dict[str, list[dict[str, object]]] = {}
        self.refuse = {"/team": 2}  # then accept


@pytest.fixture
def server() -> Iterator[tuple[str, Hooks]]:
    hooks = Hooks()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            data = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if hooks.refuse.get(self.path, 0) > 0:
                hooks.refuse[self.path] -= 1
                self.send_response(500)
            else:
                hooks.bodies.setdefault(self.path, []).append(data)
                self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}", hooks
    httpd.shutdown()


@pytest.fixture
def ledger(redis_client: redis.Redis, key_prefix: str) -> Iterator[Ledger]:
    yield Ledger(redis_client, SystemClock(), Keys(key_prefix), log_maxlen=100)
    for key in redis_client.scan_iter(f"{key_prefix}:*"):
        redis_client.delete(key)


def _run(ledger: Ledger, notify: tuple[str, ...], path: list[S]) -> str:
    job_id, _ = ledger.create(make_spec(notify=notify))
    assert ledger.claim(job_id, "tok", ttl_s=60)
    for st in path:
        ledger.transition(job_id, st, owner="tok", reason=f"now {st.value}")
    return job_id


def test_webhooks_and_a_hook_get_exactly_the_states_asked_for(
    ledger: Ledger, server: tuple[str, Hooks], tmp_path: Path
) -> None:
    url, hooks = server
    out = tmp_path / "hook.out"
    hook = tmp_path / "hook.py"
    hook.write_text(
        "import json, os, sys\n"
        "e = json.load(sys.stdin)\n"
        "st = os.environ['COLABQ_EVENT_STATE']\n"
        f"open({str(out)!r}, 'a').write(json.dumps([e, st]) + '\\n')\n"
    )
    file = tmp_path / "webhooks"
    file.write_text(
        f"# team's channel\nteam = {url}/team\ndefault = {url}/default\n"
        f"script = exec {sys.executable} {hook}\n"
    )
    file.chmod(0o600)
    sleeps: list[float] = []
    notifier = Notifier(ledger, load_targets(file), ["default"], consumer="n1",
                        backoff_s=0.01, sleep=sleeps.append)  # fmt: skip
    notifier.ensure_group()

    ok = _run(ledger, ("team:SUCCEEDED,FAILED", "script:RUNNING"), SUCCESS)
    plain = _run(ledger, (), [S.ALLOCATING, S.FAILED])
    while notifier.poll(block_ms=200):
        pass

    # team: refused twice, delivered on the third try (two retries, backing off), once.
    assert [(b["job"], b["to"]) for b in hooks.bodies["/team"]] == [(ok, "succeeded")]
    assert sleeps == [0.01, 0.02]
    body = hooks.bodies["/team"][0]
    assert str(body["text"]).startswith(f"colabq: job {ok}") and "SUCCEEDED" in str(body["text"])
    assert body["from"] == "releasing" and body["run_name"] and body["reason"] == "now succeeded"
    # The deployment's default: terminal states of every job.
    assert sorted((b["job"], b["to"]) for b in hooks.bodies["/default"]) == sorted(
        [(ok, "succeeded"), (plain, "failed")]
    )
    # The command hook: the event on stdin, its state in the environment.
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(e["job"], e["to"], st) for e, st in lines] == [(ok, "running", "running")]
    # Every entry acknowledged; the URL nowhere in Redis.
    assert ledger.r.xpending(events.events_key(ledger.keys), "notifier")["pending"] == 0
    port = url.rsplit(":", 1)[1]
    for key in ledger.r.scan_iter(f"{ledger.keys.prefix}:*"):
        kind = ledger.r.type(key).decode()
        dump = {"hash": ledger.r.hgetall, "list": lambda k: ledger.r.lrange(k, 0, -1),
                "stream": ledger.r.xrange, "string": ledger.r.get}.get(kind)  # fmt: skip
        if dump is not None:
            assert f"127.0.0.1:{port}".encode() not in repr(dump(key)).encode()


def test_a_failing_target_is_an_event_and_a_dead_consumers_entries_are_taken_over(
    ledger: Ledger, server: tuple[str, Hooks], tmp_path: Path
) -> None:
    url, hooks = server
    hooks.refuse["/team"] = 99
    file = tmp_path / "webhooks"
    file.write_text(f"team = {url}/team\n")
    file.chmod(0o600)
    dead = Notifier(ledger, load_targets(file), consumer="dead", sleep=lambda s: None)
    dead.ensure_group()
    job_id = _run(ledger, ("team",), [S.CANCELLED])
    # "dead" reads the entries and dies before delivering: they stay pending, then move.
    got = ledger.r.xreadgroup("notifier", "dead", {dead.key: ">"}, count=100)
    assert got
    live = Notifier(ledger, load_targets(file), consumer="live", claim_idle_ms=0,
                    sleep=lambda s: None)  # fmt: skip
    assert live.poll(block_ms=100) == len(got[0][1])
    failed = [
        e for e in events.read(ledger.r, ledger.keys, job=job_id) if e.kind == "notify-failed"
    ]
    assert [e.reason for e in failed] == ["webhook team: HTTP 500 (4 tries)"]
    gave_up = ledger.r.hgetall(ledger.keys.metrics_notify())  # for `colabq metrics`
    assert read_counts(gave_up, ("cancelled",)) == ({("team", "cancelled"): 1}, 0)
    assert ledger.state_of(job_id) is S.CANCELLED  # a failing hook never changes a job


def test_targets_file_and_notify_entries(tmp_path: Path) -> None:
    assert parse_notify("team") == ("team", frozenset(TERMINAL))
    assert parse_notify("team:succeeded,FAILED") == ("team", frozenset({S.SUCCEEDED, S.FAILED}))
    with pytest.raises(UserInputError, match="not a state"):
        parse_notify("team:DONE")
    file = tmp_path / "webhooks"
    file.write_text("team = https://hooks.example/x\n")
    file.chmod(0o644)
    with pytest.raises(UserInputError, match="chmod 600"):
        load_targets(file)
    file.chmod(0o600)
    assert "hooks.example" not in repr(load_targets(file))
    # A URL that cannot be posted to is a failed delivery, never a crash of the notifier.
    with pytest.raises(DeliveryFailed, match="webhook bad"):
        deliver(Target("bad", url="http://"), {"job": "j", "to": "failed"})
    with pytest.raises(DeliveryFailed, match="hook gone: FileNotFoundError"):
        deliver(Target("gone", argv=(str(tmp_path / "missing"),)), {"job": "j"})


def test_a_job_files_notify_key_reaches_the_spec(tmp_path: Path) -> None:
    from producer.jobfile import validate
    from producer.submit import build_spec
    from producer.submit_inputs import submit_request

    script = tmp_path / "train.sh"
    script.write_text("echo hi\n")
    values = {"script": script, "name": "coco-r50", "local_store": tmp_path / "s"}
    o = validate({**values, "notify": "team:SUCCEEDED"}, "job.yaml")
    spec = build_spec(submit_request(o, (), {}, lambda: pytest.fail("no ledger")))
    assert spec.notify == ("team:SUCCEEDED",)
    bad = validate({**values, "notify": ["team:DONE"]}, "job.yaml")
    with pytest.raises(UserInputError, match="not a state"):
        build_spec(submit_request(bad, (), {}, lambda: pytest.fail("no ledger")))


def test_submit_takes_notify() -> None:
    from typer.main import get_command

    from producer.cli import app

    submit = get_command(app).get_command(None, "submit")  # type: ignore[attr-defined]
    assert any("--notify" in p.opts for p in submit.params)
