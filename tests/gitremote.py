"""Git remotes for tests: a bare repository on disk with one commit pushed and one not, and a
smart-HTTP server (`git http-backend`) in front of such repositories that wants Basic auth."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit

_IDENTITY = ["-c", "user.name=colabq-test", "-c", "user.email=test@colabq.invalid"]


def git(*args: str | Path, cwd: Path | None = None) -> str:
    res = subprocess.run(
        ["git", *_IDENTITY, *map(str, args)], cwd=cwd, capture_output=True, text=True, check=True
    )
    return res.stdout.strip()


@dataclass(frozen=True)
class Remote:
    bare: Path  # the bare repository: its path is a remote, and file://<path> another
    pushed: str  # a commit the remote has
    unpushed: str  # a commit only the working clone has

    @property
    def url(self) -> str:
        return self.bare.as_uri()


def make_remote(root: Path, name: str = "project.git") -> Remote:
    bare = root / name
    work = root / f"{name}-work"
    git("init", "-q", "--bare", "-b", "main", bare)
    git("init", "-q", "-b", "main", work)
    (work / "train.py").write_text("print('hello')\n")
    git("add", "train.py", cwd=work)
    git("commit", "-q", "-m", "first", cwd=work)
    git("push", "-q", str(bare), "main", cwd=work)
    pushed = git("rev-parse", "HEAD", cwd=work)
    (work / "train.py").write_text("print('not pushed')\n")
    git("commit", "-q", "-am", "second", cwd=work)
    return Remote(bare, pushed, git("rev-parse", "HEAD", cwd=work))


@dataclass
class GitHttpServer:
    """Serves the bare repositories under `root` over git's smart HTTP, to one user and
    password; anything else gets 401 with a Basic challenge. Records every credential it was
    offered ("user:password")."""

    root: Path
    user: str
    password: str
    offered: list[str] = field(default_factory=list)
    port: int = 0

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"


class _Handler(BaseHTTPRequestHandler):
    server_of: ClassVar[dict[int, GitHttpServer]] = {}

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        conf = self.server_of[self.server.server_address[1]]  # type: ignore[index]
        auth = self.headers.get("Authorization", "")
        offered = base64.b64decode(auth[6:]).decode() if auth.startswith("Basic ") else ""
        if offered:
            conf.offered.append(offered)
        if offered != f"{conf.user}:{conf.password}":
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="colabq-test"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        parts = urlsplit(self.path)
        env = {
            **os.environ, "GIT_PROJECT_ROOT": str(conf.root), "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": self.command, "PATH_INFO": parts.path, "QUERY_STRING": parts.query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)), "REMOTE_USER": conf.user,
            "REMOTE_ADDR": "127.0.0.1", "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
        }  # fmt: skip
        out = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
        ).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        headers = [ln.split(":", 1) for ln in head.decode().split("\r\n") if ":" in ln]
        status = next((int(v.split()[0]) for k, v in headers if k == "Status"), 200)
        self.send_response(status)
        for key, value in headers:
            if key != "Status":
                self.send_header(key, value.strip())
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@contextmanager
def git_http_server(root: Path, user: str, password: str) -> Iterator[GitHttpServer]:
    assert shutil.which("git")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    conf = GitHttpServer(root, user, password, port=httpd.server_address[1])
    _Handler.server_of[conf.port] = conf
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield conf
    finally:
        httpd.shutdown()
        httpd.server_close()
        _Handler.server_of.pop(conf.port, None)
