"""`colabq drain` / `undrain` / `workers`: a worker drained by hand takes no job until undrained,
and `workers` says so; a worker that is not live is refused in one line, changing nothing."""

from __future__ import annotations

import json
import time

import redis
from typer.testing import CliRunner

from producer.cli import app
from producer.exitcodes import BAD_INPUT
from worker.fleet import health
from worker.records.fleet import WorkerCard, publish
from worker.records.ledger import Ledger

runner = CliRunner()


def _live(ledger: Ledger, name: str) -> None:
    now = time.time()
    card = WorkerCard(name=name, host="h1", gpus=("T4",), queues=("gpu.t4",), job_id=None,
                      beat_at=now, started_at=now)  # fmt: skip
    publish(ledger.r, ledger.keys, card)


def _workers(env: dict[str, str | None]) -> dict[str, dict[str, object]]:
    res = runner.invoke(app, ["workers", "--json"], env=env)
    assert res.exit_code == 0, res.output
    return {str(w["name"]): w for w in json.loads(res.output)}


def test_drain_then_undrain_by_hand(env: dict[str, str | None], ledger: Ledger) -> None:
    _live(ledger, "w1@h1")
    _live(ledger, "w2@h1")
    assert {w["state"] for w in _workers(env).values()} == {"idle"}
    res = runner.invoke(app, ["drain", "w1@h1", "--reason", "disk swap", "--json"], env=env)
    assert res.exit_code == 0, res.output
    assert json.loads(res.output) == {"worker": "w1@h1", "state": "drained", "reason": "disk swap"}
    shown = _workers(env)
    assert shown["w1@h1"]["state"] == "drained" and shown["w1@h1"]["drain_reason"] == "disk swap"
    assert shown["w1@h1"]["drained_by_hand"] is True and shown["w2@h1"]["state"] == "idle"
    table = runner.invoke(app, ["workers"], env=env)
    assert "DRAINED" in table.output and "disk swap" in table.output
    h = health.read(ledger.r, ledger.keys, "w1@h1")
    assert h is not None and h.manual, "a manual drain is not lifted by the worker's probes"
    res = runner.invoke(app, ["undrain", "w1@h1", "--json"], env=env)
    assert res.exit_code == 0 and json.loads(res.output)["was_drained"] is True
    assert _workers(env)["w1@h1"]["state"] == "idle"


def test_drain_of_a_worker_that_is_not_live_changes_nothing(
    env: dict[str, str | None], ledger: Ledger, redis_client: redis.Redis
) -> None:
    _live(ledger, "w1@h1")
    res = runner.invoke(app, ["drain", "w9@nowhere"], env=env)
    assert res.exit_code == BAD_INPUT
    assert len(res.output.strip().splitlines()) == 1 and "No live worker named" in res.output
    assert not list(redis_client.scan_iter(ledger.keys.worker_health("*")))
