"""The producer commands reach the Hub named by the settings, with huggingface_hub's own login.

Every command runs as a user runs it: the real `colabq` in a subprocess, against the local Hub
server. `COLABQ_HF_ENDPOINT` names the server (HF_ENDPOINT is unset), and every proxy variable
points at a trap that records what connects to it: a request for huggingface.co would go there
(only 127.0.0.1 bypasses it), so an empty trap proves nothing tried the real Hub.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.training_repo import GOOD_NAME, make_repo
from tests.hub.conftest import Hub

COLABQ = str(Path(sys.executable).parent / "colabq")
_DROPPED = ("HF_", "COLABQ_", "HUGGING_FACE_", "XDG_")
_PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


class ProxyTrap:
    """A TCP listener standing in for every proxy: it records each connection and closes it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.seen: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(1.0)
                try:
                    self.seen.append(conn.recv(200))
                except OSError:
                    self.seen.append(b"")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@pytest.fixture
def trap() -> Iterator[ProxyTrap]:
    t = ProxyTrap()
    yield t
    t.close()


def colabq(*args: str, cwd: Path, trap: ProxyTrap, **env: str) -> subprocess.CompletedProcess[str]:
    """`colabq ARGS` with only `env` of the Hub and colabq variables, every proxy the trap."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.upper().startswith(_DROPPED) and k.upper() not in _PROXIES
    }
    proxies = {name: trap.url for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")}
    full = {
        **base, **proxies, "NO_PROXY": "127.0.0.1,localhost", "HOME": str(cwd / "home"),
        "HF_HUB_DISABLE_XET": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "COLUMNS": "200", **env,
    }  # fmt: skip
    return subprocess.run(
        [COLABQ, *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=120
    )


def staged_file(tmp_path: Path) -> Path:
    data = tmp_path / "data.csv"
    data.write_text("a,b\n1,2\n")
    return data


def test_stage_uses_colabq_hf_endpoint_and_the_hf_token(
    hub: Hub, tmp_path: Path, trap: ProxyTrap
) -> None:
    uri = "hf://datasets/alice/staged/data.csv"
    done = colabq(
        "stage", str(staged_file(tmp_path)), "--to", uri, cwd=tmp_path, trap=trap,
        COLABQ_HF_ENDPOINT=hub.url, HF_TOKEN=hub.tokens["alice_write"],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"staged {uri}: 8 bytes" in done.stdout
    assert hub.requests("alice/staged"), "no request reached the local Hub server"
    assert trap.seen == [], trap.seen
    assert hub.api().repo_info("alice/staged", repo_type="dataset").private is True


@pytest.mark.parametrize("where", ["HF_HOME", "HF_TOKEN_PATH", "XDG_CACHE_HOME"])
def test_stage_finds_the_token_file_as_huggingface_hub_does(
    hub: Hub, tmp_path: Path, trap: ProxyTrap, where: str
) -> None:
    folder = tmp_path / "hf-login"
    token_file = {
        "HF_HOME": folder / "token",
        "HF_TOKEN_PATH": folder / "elsewhere" / "my-token",
        "XDG_CACHE_HOME": folder / "huggingface" / "token",
    }[where]
    token_file.parent.mkdir(parents=True)
    token_file.write_text(hub.tokens["alice_write"] + "\n")
    setting = str(token_file) if where == "HF_TOKEN_PATH" else str(folder)
    uri = f"hf://alice/from-{where.lower().replace('_', '-')}/data.csv"
    done = colabq(
        "stage", str(staged_file(tmp_path)), "--to", uri, cwd=tmp_path, trap=trap,
        COLABQ_HF_ENDPOINT=hub.url, **{where: setting},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert hub.requests(f"from-{where.lower().replace('_', '-')}")
    assert trap.seen == []


def test_stage_without_a_token_says_how_to_log_in(
    hub: Hub, tmp_path: Path, trap: ProxyTrap
) -> None:
    done = colabq(
        "stage", str(staged_file(tmp_path)), "--to", "hf://alice/none/x.csv", cwd=tmp_path,
        trap=trap, COLABQ_HF_ENDPOINT=hub.url, HF_HOME=str(tmp_path / "empty"),
    )  # fmt: skip
    lines = done.stderr.splitlines()
    assert done.returncode != 0 and len(lines) == 1, done.stderr
    assert "no Hub token found" in lines[0] and "hf auth login" in lines[0]
    assert hub.requests("alice/none") == [] and trap.seen == []


def test_an_unreadable_token_path_is_one_line(hub: Hub, tmp_path: Path, trap: ProxyTrap) -> None:
    done = colabq(
        "stage", str(staged_file(tmp_path)), "--to", "hf://alice/none/x.csv", cwd=tmp_path,
        trap=trap, COLABQ_HF_ENDPOINT=hub.url, HF_TOKEN_PATH=str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("colabq: Cannot read the Hub token file")
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr


def test_colabq_hf_endpoint_wins_over_hf_endpoint(
    hub: Hub, tmp_path: Path, trap: ProxyTrap
) -> None:
    done = colabq(
        "stage", str(staged_file(tmp_path)), "--to", "hf://alice/both/data.csv", cwd=tmp_path,
        trap=trap, COLABQ_HF_ENDPOINT=hub.url, HF_ENDPOINT="http://127.0.0.1:9",
        HF_TOKEN=hub.tokens["alice_write"],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert hub.requests("alice/both")


def test_submit_checks_the_output_repo_on_colabq_hf_endpoint(
    hub: Hub, tmp_path: Path, trap: ProxyTrap
) -> None:
    (tmp_path / "train.sh").write_text("echo train\n")
    waive = ["--waive", "config-diff", "--waive", "paths", "--waive", "monitoring"]
    done = colabq(
        "submit", "train.sh", "--name", "mnist-mlp-bs64-lr1e-3-repo", "--hub-repo",
        "alice/new-runs", "--repo-dir", str(tmp_path), *waive, "--dry-run", cwd=tmp_path,
        trap=trap, COLABQ_HF_ENDPOINT=hub.url, HF_TOKEN=hub.tokens["alice_write"],
        COLABQ_REDIS_URL="redis://127.0.0.1:9/0",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "created private repo" in done.stdout
    assert hub.requests("alice/new-runs")
    assert hub.api().repo_info("alice/new-runs").private is True
    assert trap.seen == []


def test_preflight_checks_hf_inputs_on_colabq_hf_endpoint(
    hub: Hub, tmp_path: Path, trap: ProxyTrap
) -> None:
    hub.private_dataset()
    hub.admin.clear_requests()
    repo = make_repo(tmp_path / "repo")
    uri = "hf://datasets/alice/ds/train.csv"
    done = colabq(
        "preflight", "--name", GOOD_NAME, "--seconds-per-epoch", "600", "--json",
        "--hub-input", f"data={uri}", cwd=repo, trap=trap, COLABQ_HF_ENDPOINT=hub.url,
        HF_TOKEN=hub.tokens["alice_read"],
    )  # fmt: skip
    paths = next(f for f in json.loads(done.stdout)["findings"] if f["check"] == "paths")
    assert next(d for d in paths["details"] if uri in d).startswith("[pass]"), paths
    assert hub.requests("alice/ds"), "no request reached the local Hub server"
    assert trap.seen == []
