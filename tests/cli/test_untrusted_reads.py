"""Everyone's tooling reads what anyone may have written, on the real Redis (a private key prefix;
the junk written with an unrestricted connection): forged entries in the event log (a field
missing, extra, not UTF-8, oversized; an `e` that is no JSON object; a state or a time that is
none) and junk in the jobs index and records. `colabq events` (listed and followed), the notifier
and `colabq status` report each bad entry once and skip it: they never raise, and the notifier
acknowledges it instead of crash-looping on it."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

from producer import exitcodes
from tests.factories import make_spec
from worker.notify.consumer import Notifier
from worker.notify.targets import load_targets
from worker.records import events
from worker.records.ledger import Ledger
from worker.states import JobState as S


def forge_events(ledger: Ledger, job_id: str) -> int:
    """Append forged entries, all of which must be skipped; returns how many."""
    key = events.events_key(ledger.keys)
    ok = json.dumps({"state": "failed", "at": 1.0, "reason": "r", "actor": "a", "host": "h"})
    forged: list[dict[bytes | str, bytes | str]] = [
        {"kind": "state", "from": "queued", "e": ok},  # no job
        {"job": b"\xff\xfe", "kind": "state", "from": "queued", "e": ok},  # not UTF-8
        {b"\xff": b"x", "job": job_id, "kind": "state", "from": "queued", "e": ok},
        {"job": job_id, "kind": "state", "from": "queued", "e": "x" * 70_000},  # oversized
        {"job": job_id, "kind": "state", "from": "queued", "e": "[1, 2]"},  # no object
        {"job": job_id, "kind": "state", "from": "queued", "e": "{"},  # no JSON
        {"job": job_id, "kind": "state", "from": "queued", "e": '{"state": "failed", "at": NaN}'},
        {"job": job_id, "kind": "state", "from": "queued", "e": '{"state": "exploded"}'},
        {"job": job_id, "kind": "state", "from": "queued"},  # a state change to no state
        {"job": "../../x", "kind": "state", "from": "queued", "e": ok},
        {"job": job_id, "kind": "NOT A KIND", "e": ok},
    ]
    for fields in forged:
        ledger.r.xadd(key, fields)  # type: ignore[arg-type]
    return len(forged)


def run(env: dict[str, str | None], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "producer.cli", *args], capture_output=True, text=True,
        env={**os.environ, **{k: v for k, v in env.items() if v is not None}}, timeout=120,
    )  # fmt: skip


def test_events_skip_and_report_each_forged_entry(
    ledger: Ledger, env: dict[str, str | None]
) -> None:
    job_id, _ = ledger.create(make_spec())
    bad = forge_events(ledger, job_id)
    # An extra field is ignored; a time no clock can show is still shown (as a number).
    ledger.r.xadd(events.events_key(ledger.keys), {
        "job": job_id, "kind": "retry", "from": "", "extra": "x",
        "e": json.dumps({"at": 1e300, "reason": "far", "actor": "a", "host": "h"}),
    })  # fmt: skip
    listed = run(env, "events", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["job"], r["kind"]) for r in rows] == [(job_id, "submit"), (job_id, "retry")]
    skipped = [line for line in listed.stderr.splitlines() if line.startswith("skipped")]
    assert len(skipped) == bad and "Traceback" not in listed.stderr, listed.stderr
    table = run(env, "events", job_id[:8])
    assert table.returncode == 0 and "far" in table.stdout and "Traceback" not in table.stderr


def test_following_events_goes_past_forged_entries(
    ledger: Ledger, env: dict[str, str | None]
) -> None:
    job_id, _ = ledger.create(make_spec())
    proc = subprocess.Popen(
        [sys.executable, "-m", "producer.cli", "events", "-f", "--json", "--since", "2999-01-01"],
        env={**os.environ, **{k: v for k, v in env.items() if v is not None}},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        for n in range(120):  # forged entries, then a good one, each half second until printed
            forge_events(ledger, job_id)
            events.note_action(ledger, f"w{n}", "drain", "disk full")
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                break
        assert ready, "the follower printed no event within 60 s"
        row = json.loads(proc.stdout.readline())
        assert row["kind"] == "drain" and row["reason"] == "disk full"
        assert proc.poll() is None  # still following
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_notifier_acknowledges_forged_entries_and_delivers_the_rest(
    ledger: Ledger, tmp_path: Path
) -> None:
    out = tmp_path / "hook.out"
    hook = tmp_path / "hook.py"
    hook.write_text(f"import sys\nopen({str(out)!r}, 'a').write(sys.stdin.read() + '\\n')\n")
    file = tmp_path / "webhooks"
    file.write_text(f"all = exec {sys.executable} {hook}\n")
    file.chmod(0o600)
    notifier = Notifier(ledger, load_targets(file), ["all"], consumer="n1", sleep=lambda s: None)
    notifier.ensure_group()
    job_id, _ = ledger.create(make_spec())
    bad = forge_events(ledger, job_id)
    # A state event of a job whose record was damaged since: the deployment's targets still hear.
    damaged, _ = ledger.create(make_spec())
    for j in (job_id, damaged):
        assert ledger.claim(j, "tok", ttl_s=60)
        ledger.transition(j, S.FAILED, owner="tok", reason="boom")
    ledger.r.hset(ledger.keys.job(damaged), "spec", "{")
    handled = 0
    while got := notifier.poll(block_ms=200):
        handled += got
    assert handled == bad + 4  # two submits, two state changes
    told = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(e["job"], e["to"]) for e in told] == [(job_id, "failed"), (damaged, "failed")]
    assert ledger.r.xpending(notifier.key, "notifier")["pending"] == 0  # no crash loop
    assert notifier.poll(block_ms=100) == 0


def test_status_lists_the_good_jobs_and_the_damaged_beside_junk_ids(
    ledger: Ledger, env: dict[str, str | None]
) -> None:
    good, _ = ledger.create(make_spec())
    damaged, _ = ledger.create(make_spec())
    ledger.r.hset(ledger.keys.job(damaged), "state", "exploded")
    for junk in (b"\xff\xfe", b"../../x", b"a" * 300):
        ledger.r.zadd(ledger.keys.jobs(), {junk: 1e9})
        ledger.r.sadd(ledger.keys.active(), junk)
    ledger.r.hset(ledger.keys.job("../../x"), mapping={"state": "queued", "run_name": "evil"})
    for args in (["status", "--json"], ["status", "--state", "live", "--json"]):
        listed = run(env, *args)
        assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
        ids = {row["job_id"]: row["state"] for row in json.loads(listed.stdout)}
        assert ids.get(good) == "queued" and "../../x" not in ids, ids
        assert "skipped" in listed.stderr
    table = run(env, "status")
    assert table.returncode == 0 and "DAMAGED" in table.stdout.upper(), table.stdout
    one = run(env, "status", good)
    assert one.returncode == exitcodes.NOT_OVER and good in one.stdout, one.stderr
    worse = run(env, "status", damaged)
    assert "damaged" in (worse.stdout + worse.stderr) and "Traceback" not in worse.stderr


def test_usage_workers_and_a_sweeps_view_beside_junk(
    ledger: Ledger, env: dict[str, str | None]
) -> None:
    import time

    from worker.flow.sweeps import SweepTag, new_sweep_id
    from worker.records.fleet import WorkerCard, publish

    sid = new_sweep_id(None)
    [(point, _)] = ledger.create_many([make_spec()], sweep=SweepTag(sid, 0))
    ledger.r.hset(ledger.keys.job(point), "run_name", b"\xffrun")
    ledger.r.zadd(ledger.keys.jobs(), {b"\xff\xfe": time.time()})
    now = time.time()
    card = WorkerCard("w1@host", "host", ("T4",), ("gpu.t4",), None, now, now)
    publish(ledger.r, ledger.keys, card)  # type: ignore[arg-type]
    ledger.r.zadd(ledger.keys.workers(), {b"\xff": now + 60, b"a b": now + 60})
    for args in (["usage", "--json"], ["workers", "--json"], ["status", "--sweep", sid, "--json"]):
        got = run(env, *args)
        assert got.returncode == 0 and "Traceback" not in got.stderr, (args, got.stderr)
        assert json.loads(got.stdout) is not None
    workers = run(env, "workers", "--json")
    assert "w1@host" in workers.stdout and "a b" not in workers.stdout
