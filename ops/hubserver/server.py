"""The HTTP server: one `ThreadingHTTPServer`, a request handler that runs each request through
faults -> authentication -> route -> response, and the request log around it.

`start_server` runs it on a background thread (tests, embedding); `__main__` runs it in the
foreground. Routes, storage, auth and faults are the other modules'; this one only sequences them
and speaks HTTP/1.1 (keep-alive, HEAD, streamed file bodies, dropped connections).
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import BinaryIO
from urllib.parse import parse_qs, urlsplit

from . import routes_admin, routes_content, routes_files, routes_repos
from .app import HubState, ServerConfig, build_state
from .auth import Principal, bearer_token
from .errors import HubError
from .http_io import BodyStream, Request, Response, error_response, json_response
from .reqlog import LeakScanner, find_leaks, redact_headers
from .routing import Route, dispatch

IDLE_KEEPALIVE_TIMEOUT_S = 60
# How often serve_forever checks for shutdown(): bounds how long stop() takes.
SHUTDOWN_POLL_S = 0.02
_COPY_CHUNK_BYTES = 1024 * 1024


class HubHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: HubState) -> None:
        self.state = state
        self.hub_routes: list[Route] = [
            *routes_repos.build_routes(state),
            *routes_content.build_routes(state),
            *routes_files.build_routes(state),
        ]
        self.admin_routes: list[Route] = routes_admin.build_routes(state)
        super().__init__((state.config.host, state.config.port), HubRequestHandler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


class HubRequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = IDLE_KEEPALIVE_TIMEOUT_S
    server: HubHTTPServer

    def do_GET(self) -> None:
        self._handle()

    def do_HEAD(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def log_message(self, format: str, *args: object) -> None:
        pass  # the request log is the record; stderr stays for real errors

    def _handle(self) -> None:
        state = self.server.state
        started = time.monotonic()
        split = urlsplit(self.path)
        headers = {name.lower(): value for name, value in self.headers.items()}
        is_admin = split.path.startswith("/_admin/")
        secrets = [*state.tokens.secrets(), bearer_token(headers.get("authorization")) or ""]
        scanner = LeakScanner(secrets)
        body = BodyStream(self.rfile, headers, scanner.feed)
        request = Request(
            method=self.command,
            path=split.path,
            query=_parse_query(split.query),
            headers=headers,
            base_url=f"http://{headers.get('host') or self.server.url.removeprefix('http://')}",
            body=body,
        )
        decision = None if is_admin else state.faults.decide(self.command, split.path)
        principal = Principal()
        if decision is not None and decision.delay_s:
            time.sleep(decision.delay_s)
        if decision is not None and decision.close:
            response = None
        elif decision is not None and decision.status is not None:
            response = json_response(
                {"error": f"Injected fault: HTTP {decision.status}"}, decision.status
            )
        else:
            response, principal = self._serve(request, is_admin)
        try:
            body.drain()
        except (RuntimeError, ConnectionError):
            self.close_connection = True
        # Logged before the answer goes out: a client that has its answer finds its request in
        # the log (a test reads the log right after its call).
        if not is_admin:
            leaks = find_leaks(secrets, split.path, split.query, headers)
            if scanner.found:
                leaks.append("body")
            state.log.record(
                {
                    "at": time.time(),
                    "method": self.command,
                    "path": self.path,
                    "status": None if response is None else response.status,
                    "headers": redact_headers(headers),
                    "user": principal.user,
                    "fault": None if decision is None else decision.label,
                    "token_leaks": leaks,
                    "duration_ms": round((time.monotonic() - started) * 1000, 1),
                }
            )
        if response is None:
            self._drop_connection()
        else:
            self._send(response, headers)

    def _serve(self, request: Request, is_admin: bool) -> tuple[Response, Principal]:
        state = self.server.state
        principal = Principal()
        try:
            if is_admin:
                return dispatch(self.server.admin_routes, request, principal), principal
            principal = state.tokens.authenticate(request.headers.get("authorization"))
            return dispatch(self.server.hub_routes, request, principal), principal
        except HubError as error:
            return error_response(error), principal
        except ConnectionError as error:  # the client hung up mid-body: nothing left to talk to
            self.close_connection = True
            return error_response(HubError(400, f"Incomplete request: {error}")), principal
        except Exception as exc:  # a bug must answer 500, not kill the connection silently
            traceback.print_exc(file=sys.stderr)
            return error_response(HubError(500, f"Internal server error: {exc!r}")), principal

    def _send(self, response: Response, request_headers: dict[str, str]) -> None:
        request_id = request_headers.get("x-amzn-trace-id") or str(uuid.uuid4())
        try:
            self.send_response(response.status)
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(response.content_length))
            self.send_header("X-Request-Id", request_id)
            for name, value in response.headers:
                self.send_header(name, value)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command == "HEAD":
                return
            if response.file is None:
                self.wfile.write(response.body)
                return
            with response.file.path.open("rb") as source:
                source.seek(response.file.start)
                _copy_exactly(source, self.wfile, response.file.length)  # type: ignore[arg-type]
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _drop_connection(self) -> None:
        """Hang up without a single byte of answer (the `close` fault)."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)


def _copy_exactly(source: BinaryIO, target: BinaryIO, length: int) -> None:
    remaining = length
    while remaining > 0:
        chunk = source.read(min(_COPY_CHUNK_BYTES, remaining))
        if not chunk:
            raise ConnectionError("stored file shorter than its recorded size")
        target.write(chunk)
        remaining -= len(chunk)


def _parse_query(query: str) -> dict[str, list[str]]:
    return parse_qs(query, keep_blank_values=True)


@dataclass
class RunningServer:
    """A server on a background thread; `stop()` shuts it down and frees the port."""

    url: str
    state: HubState
    httpd: HubHTTPServer
    thread: threading.Thread

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def start_server(config: ServerConfig) -> RunningServer:
    state = build_state(config)
    httpd = HubHTTPServer(state)
    thread = threading.Thread(
        target=httpd.serve_forever, args=(SHUTDOWN_POLL_S,), name="hubserver", daemon=True
    )
    thread.start()
    return RunningServer(httpd.url, state, httpd, thread)
