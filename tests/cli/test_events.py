"""`colabq events` on the real Redis (a private key prefix): a job's submit, its state changes
(from the create, claim and transition paths, each appended with its history entry) and a
cancel request, each with who, from which host and why; `--since` and the table."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from producer.cli import app
from tests.factories import make_spec
from worker.records import events
from worker.records.claim import Claim, claim_and_start
from worker.records.ledger import Ledger
from worker.states import JobState as S

runner = CliRunner()


def test_events_list_a_jobs_submit_state_changes_and_cancel(
    ledger: Ledger, env: dict[str, str | None]
) -> None:
    job_id, _ = ledger.create(make_spec())
    other, _ = ledger.create(make_spec())
    res = claim_and_start(ledger, job_id, "tok", ttl_s=60, worker="w1", owner_host="h1",
                          nonce="n", wall_deadline_at=9e9)  # fmt: skip
    assert res.claim is Claim.CLAIMED
    cancel = runner.invoke(app, ["cancel", job_id[:10], "--reason", "wrong config"], env=env)
    assert cancel.exit_code == 0, cancel.output
    ledger.transition(job_id, S.CANCELLED, owner="tok", reason="cancelled: wrong config")

    result = runner.invoke(app, ["events", job_id[:10], "--json"], env=env)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert [(r["kind"], r["from"], r["to"]) for r in rows] == [
        ("submit", "", "queued"),
        ("state", "queued", "allocating"),
        ("cancel", "", "allocating"),
        ("state", "allocating", "cancelled"),
    ]
    assert {r["job"] for r in rows} == {job_id}
    me = ledger.identity
    assert all(r["actor"] == me.actor and r["host"] == me.host == socket.gethostname()
               for r in rows)  # fmt: skip
    assert [r["reason"] for r in rows] == [
        "submitted", "claimed by w1", "wrong config", "cancelled: wrong config"
    ]  # fmt: skip
    # The whole log holds the other job's submit too; --since in the future holds nothing.
    every = runner.invoke(app, ["events"], env=env)
    assert every.exit_code == 0 and other in every.output and "queued -> allocating" in every.output
    later = runner.invoke(app, ["events", "--since", "2999-01-01", "--json"], env=env)
    assert later.exit_code == 0 and later.output == ""


def test_an_action_event_and_retention_trim(ledger: Ledger) -> None:
    # An append trims what is older than the retention (stream ids are Redis's clock).
    ledger.r.xadd(events.events_key(ledger.keys), events.fields("old", "submit", "", "{}"),
                  id="1000-0")  # fmt: skip
    events.note_action(ledger, "w7", "drain", "disk full")
    (e,) = events.read(ledger.r, ledger.keys, job="w7")
    assert (e.kind, e.reason, e.actor) == ("drain", "disk full", ledger.identity.actor)
    events.note_action(ledger, "w7", "undrain", "fixed")
    assert [x.job for x in events.read(ledger.r, ledger.keys)] == ["w7", "w7"]


def test_notifier_refuses_a_targets_file_others_can_read(
    env: dict[str, str | None], tmp_path: Path
) -> None:
    file = tmp_path / "webhooks"
    file.write_text("team = https://hooks.example/secret\n")
    file.chmod(0o644)
    result = runner.invoke(app, ["notifier"], env={**env, "COLABQ_WEBHOOKS_FILE": str(file)})
    assert result.exit_code != 0 and "chmod 600" in result.output
    assert "Traceback" not in result.output and "hooks.example" not in result.output


def test_a_restored_record_is_an_event(ledger: Ledger) -> None:
    spec = make_spec()
    assert ledger.restore(spec, "tok", S.RUNNING, ttl_s=60)
    (e,) = events.read(ledger.r, ledger.keys, job=spec.job_id)
    assert (e.kind, e.src, e.dst) == ("state", "", "running") and "restored" in e.reason


def test_follow_prints_an_event_appended_after_it_started(
    ledger: Ledger, env: dict[str, str | None]
) -> None:
    # --since in the future: only what the follower's XREAD BLOCK sees can be printed.
    proc = subprocess.Popen(
        [sys.executable, "-m", "producer.cli", "events", "-f", "--json", "--since", "2999-01-01"],
        env={**os.environ, **{k: v for k, v in env.items() if v is not None}},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        for n in range(120):  # one event each half second until the follower prints one
            events.note_action(ledger, f"w{n}", "drain", "disk full")
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                break
        assert ready, "the follower printed no event within 60 s"
        row = json.loads(proc.stdout.readline())
        assert (
            row["kind"] == "drain" and row["job"].startswith("w") and row["reason"] == "disk full"
        )
    finally:
        proc.terminate()
        proc.wait(timeout=30)
