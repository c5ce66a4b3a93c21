"""`colabq metrics` as a person starts it: a port it cannot listen on is one line (exit 2, no
traceback), and a scrape while Redis is away says `colabq_ledger_up 0` and nothing else, then
the truth again once Redis answers."""

from __future__ import annotations

import socket
import urllib.request

from prometheus_client import CollectorRegistry, generate_latest
from typer.testing import CliRunner

from producer.cli import app
from tests.factories import make_spec
from worker.metrics.families import Options
from worker.metrics.live import LiveJobs
from worker.metrics.service import LedgerCollector, build_registry, serve
from worker.records.ledger import Ledger
from worker.records.redisconn import connect

runner = CliRunner()


def test_a_port_in_use_is_one_line(env: dict[str, str | None]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = runner.invoke(app, ["metrics", "--port", str(port)], env=env)
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and f"cannot listen on 127.0.0.1:{port}" in lines[0], res.output
    assert "choose another --port" in lines[0] and "Traceback" not in res.output


def test_a_scrape_without_redis_says_so_then_the_truth_again(ledger: Ledger) -> None:
    ledger.create(make_spec())
    live = LiveJobs(ledger.r, ledger.keys)
    live.load()
    gone = connect("redis://127.0.0.1:1/0", retry_s=0.1)  # nothing listens there
    down = LedgerCollector(gone, ledger.keys, live, Options(floor_for=lambda a: 0.0), "")
    registry = CollectorRegistry()
    registry.register(down)
    assert generate_latest(registry).decode().splitlines()[-1] == "colabq_ledger_up 0.0"
    assert "colabq_jobs{" not in generate_latest(registry).decode()
    up = LedgerCollector(ledger.r, ledger.keys, live, Options(floor_for=lambda a: 0.0), "")
    server = serve(build_registry(up), 0, "127.0.0.1")
    try:
        port = server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        assert "colabq_ledger_up 1.0" in text and 'colabq_queue_depth{gpu="T4"} 1.0' in text
    finally:
        server.shutdown()
