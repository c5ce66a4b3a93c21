"""A small https file server for tests: serves `files` (path -> bytes) on 127.0.0.1 with a
self-signed certificate made for it (`cafile`: give it to a client as SSL_CERT_FILE), 404 for
anything else. It records every request (path and whether it carried an Authorization header),
and a path in `together` is answered only once every path in `together` was asked for: a client
that fetches them one after the other never gets the first (its request fails after
`together_timeout_s`), so a test waits for a state, not a time."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass
class HttpsFiles:
    port: int
    cafile: Path
    files: dict[str, bytes]
    together: frozenset[str] = frozenset()
    together_timeout_s: float = 60.0
    asked: list[tuple[str, bool]] = field(default_factory=list)  # (path, had Authorization)
    _arrived: set[str] = field(default_factory=set)
    _cond: threading.Condition = field(default_factory=threading.Condition)

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def wait_together(self, path: str) -> bool:
        with self._cond:
            self._arrived.add(path)
            self._cond.notify_all()
            return self._cond.wait_for(
                lambda: self.together <= self._arrived, timeout=self.together_timeout_s
            )


def make_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (openssl), in `folder`."""
    openssl = shutil.which("openssl")
    assert openssl, "the https tests need openssl to make a certificate"
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    cert.chmod(0o644)
    return cert, key


@contextmanager
def https_files(
    folder: Path, files: dict[str, bytes], together: frozenset[str] = frozenset()
) -> Iterator[HttpsFiles]:
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = make_certificate(folder)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    conf = HttpsFiles(httpd.server_address[1], cert, files, together)
    httpd.conf = conf  # type: ignore[attr-defined]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    with serving(httpd):
        yield conf


@contextmanager
def serving(httpd: ThreadingHTTPServer) -> Iterator[None]:
    """`httpd` serves from a daemon thread until the block ends, then closes."""
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        httpd.shutdown()
        httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        conf: HttpsFiles = self.server.conf  # type: ignore[attr-defined]
        path = self.path.lstrip("/")
        conf.asked.append((path, "Authorization" in self.headers))
        body = conf.files.get(path)
        if body is None:
            self.send_error(404)
            return
        if path in conf.together and not conf.wait_together(path):
            self.send_error(409, "the other downloads never came")
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
