"""Path verification: local paths present / missing / unreadable, remote URIs checked at once."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from producer.preflight.configs import parse_config_text
from producer.preflight.path_refs import PathRole, find_path_refs, interpolate
from producer.preflight.paths import check_local_path, check_paths
from producer.preflight.remote import (
    HttpRemoteChecker,
    RemoteState,
    RemoteStatus,
    SchemeRemoteChecker,
    build_remote_checker,
    check_all,
)
from producer.preflight.report import Verdict

# --- local paths ------------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "data" / "train").mkdir(parents=True)
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "model.pt").write_bytes(b"w" * 10)
    (tmp_path / "weights" / "dir.pt").mkdir()  # a folder where a file is expected
    (tmp_path / "runs").mkdir()
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    os.mkfifo(tmp_path / "pipe.csv")
    (tmp_path / "notdir").write_text("x")
    return tmp_path


# (relative path, role, expect_file, verdict, phrase)
LOCAL = [
    ("data/train", PathRole.INPUT, None, Verdict.PASS, "folder, readable"),
    ("weights/model.pt", PathRole.INPUT, True, Verdict.PASS, "file, 10 bytes"),
    ("data/missing", PathRole.INPUT, None, Verdict.FAIL, "does not exist"),
    ("dangling", PathRole.INPUT, None, Verdict.FAIL, "broken symlink"),
    ("weights/dir.pt", PathRole.INPUT, True, Verdict.FAIL, "is a folder, but a file is expected"),
    ("weights/model.pt", PathRole.INPUT, False, Verdict.FAIL, "a folder is expected"),
    ("pipe.csv", PathRole.INPUT, True, Verdict.FAIL, "not a regular file or folder"),
    ("notdir/child", PathRole.INPUT, None, Verdict.FAIL, "cannot be reached"),
    ("runs/new-run", PathRole.OUTPUT, None, Verdict.PASS, "parent folder exists"),
    ("runs", PathRole.OUTPUT, None, Verdict.PASS, "exists already"),
    ("nowhere/new-run", PathRole.OUTPUT, None, Verdict.FAIL, "parent folder"),
    ("weights/model.pt/x", PathRole.OUTPUT, None, Verdict.FAIL, "not a folder"),
    ("weights/model.pt", PathRole.CONFIG, None, Verdict.PASS, "readable"),
]


@pytest.mark.parametrize(("rel", "role", "expect_file", "verdict", "phrase"), LOCAL)
def test_local_paths(
    tree: Path, rel: str, role: PathRole, expect_file: bool | None, verdict: Verdict, phrase: str
) -> None:
    got, detail = check_local_path(tree / rel, role, expect_file)
    assert got is verdict
    assert phrase in detail


@pytest.mark.skipif(
    os.geteuid() == 0,
    reason="root reads mode-000 files; covered above by the "
    "broken-symlink and folder-for-file cases, which fail the same way as root",
)
def test_unreadable_file_fails_as_non_root(tmp_path: Path) -> None:
    secret = tmp_path / "secret.pt"
    secret.write_bytes(b"x")
    secret.chmod(0)
    verdict, detail = check_local_path(secret, PathRole.INPUT, True)
    assert verdict is Verdict.FAIL and "permission denied" in detail


CONFIG = """
data:
  root: data
  train_dir: ${data.root}/train
  val_dir: ${data.root}/val
dataset: imagenet
pretrained: weights/model.pt
resume_from: null
output_dir: runs/exp
cache_dir: $HOME/cache
model_name_or_path: facebook/dinov2-base
tokenizer_name: bert-base-uncased
"""


def test_config_path_refs_and_interpolation() -> None:
    refs, notes = find_path_refs(
        parse_config_text(Path("c.yaml"), CONFIG).data, {"HOME": "/home/u"}
    )
    by_key = {r.key: r for r in refs}
    assert by_key["data.train_dir"].value == "data/train"
    assert by_key["data.train_dir"].expect_file is False
    assert by_key["pretrained"].expect_file is True
    assert by_key["output_dir"].role is PathRole.OUTPUT
    assert by_key["cache_dir"].value == "/home/u/cache"
    assert by_key["model_name_or_path"].hub_uri == "hf://facebook/dinov2-base"
    assert "resume_from" not in by_key  # null: nothing to check
    assert "tokenizer_name" not in by_key  # a bare Hub name, no `/`
    assert any("dataset = 'imagenet' is not a path" in n for n in notes)
    assert "data.root" not in by_key  # `root` alone is not a path key (`data_root` is)
    assert interpolate("${missing}/x", {}, {}) is None


def test_check_paths_reports_missing_and_passes_present(tree: Path) -> None:
    config_path = tree / "train.yaml"
    config_path.write_text(CONFIG)
    finding = check_paths(
        parse_config_text(config_path, CONFIG),
        config_path=config_path,
        repo=tree,
        env={"HOME": str(tree)},
        remote_checker=SchemeRemoteChecker(
            {"hf": lambda uri: RemoteStatus(RemoteState.EXISTS, "found")}
        ),
    )
    text = "\n".join(finding.details)
    assert finding.verdict is Verdict.FAIL
    assert "[fail] data.val_dir = data/val (input): does not exist" in text
    assert "[pass] data.train_dir = data/train" in text
    assert "[pass] model_name_or_path = facebook/dinov2-base → hf://facebook/dinov2-base" in text
    assert "[pass] cache_dir = " in text  # $HOME/cache: an output, its parent ($HOME) exists
    assert "data.val_dir" in finding.next_action


def test_unparsable_config_is_skip_not_pass(tree: Path) -> None:
    config_path = tree / "train.yaml"
    config_path.write_text("a: [\n")
    finding = check_paths(
        None, config_path=config_path, repo=tree, env={}, remote_checker=SchemeRemoteChecker({})
    )
    assert finding.verdict is Verdict.SKIP


def test_hub_input_that_is_a_local_path_fails(tree: Path) -> None:
    config_path = tree / "weights" / "model.pt"
    finding = check_paths(
        None,
        config_path=config_path,
        repo=tree,
        env={},
        remote_checker=SchemeRemoteChecker({}),
        hub_inputs={"data": "/mnt/data"},
    )
    assert finding.verdict is Verdict.FAIL
    assert "not a URI" in "\n".join(finding.details)


# --- remote URIs ------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    release = threading.Event()
    methods: list[tuple[str, str]] = []

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _answer(self, method: str) -> None:
        self.methods.append((method, self.path))
        status = {
            "/exists": 200,
            "/missing": 404,
            "/forbidden": 403,
            "/error": 500,
        }.get(self.path)
        if self.path == "/nohead":
            status = 405 if method == "HEAD" else 206
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/exists")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/slow":
            self.release.wait(10)
            status = 200
        self.send_response(status or 404)
        self.send_header("Content-Length", "1")
        self.end_headers()
        if method == "GET":
            self.wfile.write(b"x")

    def do_HEAD(self) -> None:
        self._answer("HEAD")

    def do_GET(self) -> None:
        self._answer("GET")


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    _Handler.methods = []
    _Handler.release = threading.Event()
    # A short poll interval: shutdown() waits for the loop to notice, 0.5 s by default.
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        _Handler.release.set()
        httpd.shutdown()
        httpd.server_close()


def _http(timeout_s: float = 5.0) -> HttpRemoteChecker:
    return HttpRemoteChecker(timeout_s=timeout_s, allow_http=True, use_env_proxies=False)


# (path, state, phrase)
REMOTE = [
    ("/exists", RemoteState.EXISTS, "HTTP 200"),
    ("/redirect", RemoteState.EXISTS, "HTTP 200"),
    ("/nohead", RemoteState.EXISTS, "HTTP 206"),
    ("/missing", RemoteState.MISSING, "not found"),
    ("/forbidden", RemoteState.MISSING, "not readable"),
    ("/error", RemoteState.UNCHECKABLE, "HTTP 500"),
]


@pytest.mark.parametrize(("path", "state", "phrase"), REMOTE)
def test_http_checker(server: str, path: str, state: RemoteState, phrase: str) -> None:
    status = _http().check(server + path)
    assert status.state is state
    assert phrase in status.detail


def test_http_checker_keeps_head_across_a_redirect(server: str) -> None:
    _http().check(server + "/redirect")
    assert _Handler.methods == [("HEAD", "/redirect"), ("HEAD", "/exists")]


def test_unreachable_and_slow_servers_are_uncheckable(server: str) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    assert _http().check(f"http://127.0.0.1:{closed_port}/x").state is RemoteState.UNCHECKABLE
    assert _http(timeout_s=0.3).check(server + "/slow").state is RemoteState.UNCHECKABLE


def test_plain_http_needs_opting_in() -> None:
    status = HttpRemoteChecker().check("http://127.0.0.1:1/x")
    assert status.state is RemoteState.UNCHECKABLE and "not an https URI" in status.detail


def test_routing_gs_uncheckable_hf_delegated() -> None:
    seen: list[str] = []

    def hf(uri: str) -> RemoteStatus:
        seen.append(uri)
        return RemoteStatus(RemoteState.MISSING, "no such repo")

    checker = build_remote_checker(hf=hf)
    assert checker.check("gs://bucket/data").state is RemoteState.UNCHECKABLE
    assert checker.check("hf://org/missing").state is RemoteState.MISSING
    assert seen == ["hf://org/missing"]
    assert "gs" not in checker.routes


def test_remote_uris_are_checked_concurrently() -> None:
    uris = [f"hf://org/model-{i}" for i in range(4)]
    barrier = threading.Barrier(len(uris), timeout=5)

    class Rendezvous:
        def check(self, uri: str) -> RemoteStatus:
            barrier.wait()  # raises (→ UNCHECKABLE) unless all four are in flight at once
            return RemoteStatus(RemoteState.EXISTS, "ok")

    statuses = check_all(uris + uris[:1], Rendezvous())
    assert list(statuses) == uris  # de-duplicated, in order
    assert all(s.state is RemoteState.EXISTS for s in statuses.values())


def test_checker_crash_is_uncheckable_not_raised() -> None:
    class Broken:
        def check(self, uri: str) -> RemoteStatus:
            raise RuntimeError("boom")

    status = check_all(["https://x/y"], Broken())["https://x/y"]
    assert status.state is RemoteState.UNCHECKABLE and "boom" in status.detail


def test_check_paths_remote_verdicts(server: str, tmp_path: Path) -> None:
    config_path = tmp_path / "c.yaml"
    text = f"data_path: {server}/exists\nval_path: {server}/missing\n"
    config_path.write_text(text)
    checker = SchemeRemoteChecker({"http": _http().check})

    def run(inputs: dict[str, str]) -> Verdict:
        return check_paths(
            parse_config_text(config_path, text),
            config_path=config_path,
            repo=tmp_path,
            env={},
            remote_checker=checker,
            hub_inputs=inputs,
        ).verdict

    assert run({}) is Verdict.FAIL  # the missing one
    text = f"data_path: {server}/exists\n"
    config_path.write_text(text)
    assert run({}) is Verdict.PASS
    assert run({"extra": "gs://bucket/x"}) is Verdict.SKIP  # uncheckable: never a pass


def test_unreadable_file_reason_even_as_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Root reads anything, so the refusal the kernel would give a user is simulated at os.open.
    secret = tmp_path / "secret.pt"
    secret.write_bytes(b"x")

    def refuse(path: object, flags: int, *args: object) -> int:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(os, "open", refuse)
    verdict, detail = check_local_path(secret, PathRole.INPUT, True)
    assert verdict is Verdict.FAIL
    assert detail == "file is not readable: permission denied"
