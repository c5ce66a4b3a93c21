"""Git remotes for tests: a bare repository on disk with one commit pushed and one not, and a
smart-HTTP server (`git http-backend`) in front of such repositories that wants Basic auth."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit

from tests.httpsfiles import serving

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


def pushed_repo(root: Path, name: str, populate: Callable[[Path], None]) -> tuple[Path, Path, str]:
    """A bare repository `name` under `root` and its working clone, with one commit of what
    `populate` puts in the clone pushed: (bare, clone, commit)."""
    bare = root / name
    work = root / f"{name}-work"
    git("init", "-q", "--bare", "-b", "main", bare)
    git("init", "-q", "-b", "main", work)
    populate(work)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "first", cwd=work)
    git("push", "-q", str(bare), "main", cwd=work)
    return bare, work, git("rev-parse", "HEAD", cwd=work)


def make_remote(root: Path, name: str = "project.git") -> Remote:
    bare, work, pushed = pushed_repo(
        root, name, lambda work: (work / "train.py").write_text("print('hello')\n")
    )
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
    try:
        with serving(httpd):
            yield conf
    finally:
        _Handler.server_of.pop(conf.port, None)


def canary_key(path: Path, marker: str, cipher: str = "none") -> str:
    """A deploy key file (0600) in OpenSSH's format (unencrypted unless `cipher` names one)
    whose text holds `marker`; returns its base64 line, to look for wherever the key must not
    be. Never a usable key: only the fake ssh below reads it, and only its digest."""
    import struct

    magic, name = b"openssh-key-v1\x00", cipher.encode()
    blob = magic + struct.pack(">I", len(name)) + name + f"::{marker}::".encode() * 4
    body = base64.b64encode(blob).decode()
    begin, end = "-----BEGIN OPENSSH PRIVATE KEY-----", "-----END OPENSSH PRIVATE KEY-----"
    path.write_text(f"{begin}\n{body}\n{end}\n")
    path.chmod(0o600)
    return body


_FAKE_SSH = '''#!{python}
"""A fake `ssh` for tests: records how it was called (its argv, the key file's mode, owner and
digest, its folder's mode, the known hosts it was given) in {records}, then serves the fetch
from the bare repositories under {root} with `git upload-pack`, as a forge's sshd would, for
host {host} and only with the deploy key whose digest is {digest} (or to anyone: {anyone})."""
import hashlib, json, os, shlex, stat, sys, time
args = sys.argv[1:]
rec = {{"argv": args, "uid": os.getuid()}}
key, opts, i = None, [], 0
while i < len(args) and args[i].startswith("-"):
    if args[i] in ("-i", "-o", "-p", "-l", "-F", "-J"):
        if args[i] == "-i":
            key = args[i + 1]
        if args[i] == "-o":
            opts.append(args[i + 1])
        i += 2
    else:
        i += 1
host, command = args[i].rpartition("@")[2], " ".join(args[i + 1:])
rec.update(host=host, command=command, options=opts)
if key is not None and os.path.exists(key):
    st, folder = os.stat(key), os.stat(os.path.dirname(key))
    rec["key"] = {{"path": key, "mode": stat.S_IMODE(st.st_mode), "uid": st.st_uid,
                  "dir_mode": stat.S_IMODE(folder.st_mode), "dir_uid": folder.st_uid,
                  "sha256": hashlib.sha256(open(key, "rb").read()).hexdigest()}}
known = [o.split("=", 1)[1] for o in opts if o.startswith("UserKnownHostsFile=")]
if known and os.path.exists(known[0]):
    rec["known_hosts"] = sorted({{ln.split()[0] for ln in open(known[0]) if ln.strip()
                                 and not ln.startswith("#")}})
with open(os.path.join({records!r}, f"{{time.time_ns()}}-{{os.getpid()}}.json"), "w") as f:
    json.dump(rec, f)
if host != {host!r} or not ({anyone} or rec.get("key", {{}}).get("sha256") == {digest!r}):
    sys.stderr.write(f"git@{{host}}: Permission denied (publickey).\\n")
    sys.exit(255)
prog, path = shlex.split(command)
os.execvp("git", ["git", prog.removeprefix("git-"), os.path.join({root!r}, path.lstrip("/~"))])
'''


@dataclass(frozen=True)
class FakeSsh:
    """The fake ssh's folder (put it first on PATH) and what it recorded, one call each."""

    bin_dir: Path
    records: Path

    def calls(self) -> list[dict[str, object]]:
        import json

        return [json.loads(p.read_text()) for p in sorted(self.records.glob("*.json"))]


def fake_ssh(where: Path, root: Path, host: str, key: Path | None, anyone: bool = False) -> FakeSsh:
    """An `ssh` in `where`/bin that serves `root`'s bare repositories as `host` to `key` alone
    (its digest), or to `anyone` (a user's own ssh key, on a submitting machine), recording
    every call in `where`/records (both readable by anyone: a VM's fetch may run as another
    user)."""
    import hashlib
    import sys

    bin_dir, records = where / "bin", where / "records"
    bin_dir.mkdir(parents=True)
    records.mkdir()
    records.chmod(0o777)
    digest = hashlib.sha256(key.read_bytes()).hexdigest() if key is not None else "-"
    ssh = bin_dir / "ssh"
    ssh.write_text(_FAKE_SSH.format(python=sys.executable, records=str(records), root=str(root),
                                    host=host, digest=digest, anyone=anyone))  # fmt: skip
    ssh.chmod(0o755)
    return FakeSsh(bin_dir, records)
