"""The VM's self-release endpoint: `POST /unassign` on 127.0.0.1, like `google.colab.runtime`.

Runs detached, one per VM, started by `colab new`. It answers 200, waits a moment (so the caller
can finish its request), then unassigns its own VM server-side, which kills all of that VM's
processes, and exits. It also exits on its own once the assignment is gone by any other route.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .backend import Backend
from .context import time_scale_from
from .jsonfile import write_json
from .vm import vm_paths

RELEASE_GRACE_S = 0.3
WATCH_INTERVAL_S = 0.5


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    backend: Backend
    endpoint: str
    releasing: threading.Event


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _reply(self, status: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("", "/health"):
            self._reply(200, {"endpoint": self.server.endpoint})
        else:
            self._reply(404, {"error": "not found"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if self.path.split("?", 1)[0].rstrip("/") != "/unassign":
            self._reply(404, {"error": "not found"})
            return
        self._reply(200, {})
        self.server.releasing.set()

    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write(f"{time.strftime('%H:%M:%S')} {format % args}\n")


def _watch(server: _Server) -> None:
    """Release when asked; exit when the assignment disappeared some other way."""
    while True:
        if server.releasing.wait(WATCH_INTERVAL_S):
            time.sleep(RELEASE_GRACE_S)
            server.backend.unassign(server.endpoint, exclude_pid=os.getpid())
            break
        if server.backend.get(server.endpoint) is None:
            break
    server.shutdown()


def main(argv: list[str]) -> int:
    emu_home, endpoint = Path(argv[0]), argv[1]
    server = _Server(("127.0.0.1", 0), _Handler)
    server.backend = Backend(emu_home, time_scale_from(os.environ))
    server.endpoint = endpoint
    server.releasing = threading.Event()
    write_json(vm_paths(emu_home, endpoint).state, {"port": server.server_port, "pid": os.getpid()})
    threading.Thread(target=_watch, args=(server,), daemon=True).start()
    server.serve_forever(poll_interval=0.1)
    return 0
