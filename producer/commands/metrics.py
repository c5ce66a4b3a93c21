"""`colabq metrics`: the Prometheus endpoint (`/metrics`) of the queue, served from the ledger
until stopped (`worker.metrics`): jobs by state, queue depth and oldest wait per GPU type, the
wait and run histograms, GPU-seconds and compute units by account and user, balances, workers
and drains, VM heartbeat age, janitor actions, notification failures. It reads, never writes.
"""

from __future__ import annotations

import signal
import threading
from typing import Annotated

import typer

from producer.clictx import _connect, cannot_listen, load_settings, out

DEFAULT_PORT = 9815


def metrics(
    port: Annotated[int, typer.Option(help="The port /metrics is served on.")] = DEFAULT_PORT,
    address: Annotated[
        str, typer.Option(help="The address it listens on (0.0.0.0: every interface).")
    ] = "127.0.0.1",
) -> None:
    """Serve Prometheus metrics of the queue on /metrics until stopped."""
    from worker.metrics.families import Options
    from worker.metrics.live import LiveJobs
    from worker.metrics.service import Follower, LedgerCollector, build_registry, serve

    settings = load_settings()
    ledger = _connect(settings)
    live = LiveJobs(ledger.r, ledger.keys)
    opts = Options(floor_for=settings.budget_floor_for, job_labels=settings.metrics_job_labels)
    collector = LedgerCollector(ledger.r, ledger.keys, live, opts, settings.queue_prefix)
    try:
        server = serve(build_registry(collector), port, address)
    except OSError as exc:
        raise cannot_listen(exc, "colabq metrics", address, port) from None
    stop = threading.Event()
    follower = Follower(live, stop, resync_s=settings.metrics_resync_s)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    live.load()
    follower.start()
    host, bound = server.server_address[:2]
    out.print(f"colabq metrics: serving http://{host}:{bound}/metrics "
              f"({len(live.snapshot())} live jobs)", markup=False)  # fmt: skip
    while not stop.wait(1.0):
        pass
    server.shutdown()
