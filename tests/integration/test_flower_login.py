"""Flower never runs open: every way of starting it without a login (`colabq flower` with no
login file, Celery's own `celery … flower` or `python -m flower` without colabq's `--conf`, a
half-set OAuth, a password on the command line or in `FLOWER_BASIC_AUTH`) exits with one line
before it listens; `colabq flower` with a login file answers 401 on every page without the
password and 200 with it. Real processes on the real Redis (a private key and queue prefix)."""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from producer.broker import free_port

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
AUTH = ("ops", "flower-login-test")
PAGES = ("/", "/tasks", "/workers", "/api/workers")
GOOGLE = "flower.views.auth.GoogleAuth2LoginHandler"


@pytest.fixture(scope="module")
def base_env(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment without any login of the caller's, on a private prefix of the test Redis."""
    tmp = tmp_path_factory.mktemp("flower-login")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COLABQ_", "FLOWER_"))}
    return {**env, "COLABQ_REDIS_URL": redis_url, "COLABQ_KEY_PREFIX": f"flw-{os.getpid()}",
            "COLABQ_QUEUE_PREFIX": f"flw-{os.getpid()}.", "COLABQ_STATE_DIR": str(tmp / "state"),
            "COLABQ_FLOWER_DB": str(tmp / "flower.db"), "HOME": str(tmp)}  # fmt: skip


@pytest.fixture(scope="module")
def auth_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("flower-auth") / "flower-auth"
    path.touch(mode=0o600)
    path.write_text(f"{AUTH[0]}:{AUTH[1]}\n")
    return str(path)


def wait_listening(proc: subprocess.Popen[bytes], port: int, timeout_s: float = 60) -> bool:
    """Until Flower accepts connections on `port` (True) or its process ends (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *_: object) -> None:
        return None  # a redirect (to a login page) is the answer, not followed


def status(url: str, auth: tuple[str, str] | None) -> int:
    """The page's HTTP status, redirects not followed."""
    req = urllib.request.Request(url)
    if auth:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.build_opener(NoRedirect).open(req, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def celery_flower(*args: str, conf: bool = True) -> list[str]:
    cmd = [str(BIN / "celery"), "-A", "worker.celery_app", "flower", *args]
    return [*cmd, f"--conf={ROOT / 'ops' / 'flowerconfig.py'}"] if conf else cmd


def test_every_way_of_starting_flower_without_a_login_exits_with_one_line(
    base_env: dict[str, str], auth_file: str, tmp_path: Path
) -> None:
    loose = tmp_path / "loose-auth"
    loose.write_text("ops:pw\n")
    loose.chmod(0o644)
    with_file = {"COLABQ_FLOWER_AUTH_FILE": auth_file}
    colabq = [str(BIN / "colabq"), "flower"]
    oauth_rest = {"FLOWER_AUTH": ".*@example.com", "FLOWER_OAUTH2_REDIRECT_URI": "https://x/login"}
    # name: (command, environment added, what the one line must name)
    cases: dict[str, tuple[list[str], dict[str, str], str]] = {
        "colabq flower, no login file": (colabq, {}, "COLABQ_FLOWER_AUTH_FILE"),
        "colabq flower, a login file others can read": (
            colabq, {"COLABQ_FLOWER_AUTH_FILE": str(loose)}, "chmod 600"),
        "colabq flower, OAuth provider only": (
            colabq, {"FLOWER_AUTH_PROVIDER": GOOGLE}, "without FLOWER_AUTH"),
        "celery flower without --conf (login file set)": (
            celery_flower(conf=False), with_file, "colabq flower"),
        "python -m flower without --conf": (
            [sys.executable, "-m", "flower", "-A", "worker.celery_app", "flower"], {},
            "colabq flower"),
        "--conf, no login file": (celery_flower(), {}, "COLABQ_FLOWER_AUTH_FILE"),
        "--conf, OAuth provider without FLOWER_AUTH": (
            celery_flower(), {"FLOWER_AUTH_PROVIDER": GOOGLE}, "without FLOWER_AUTH"),
        "--conf, OAuth without key and secret": (
            celery_flower(), {"FLOWER_AUTH_PROVIDER": GOOGLE, **oauth_rest},
            "FLOWER_OAUTH2_KEY, FLOWER_OAUTH2_SECRET"),
        "--conf, FLOWER_AUTH without a provider": (
            celery_flower(), {"FLOWER_AUTH": ".*@example.com"}, "FLOWER_AUTH_PROVIDER"),
        "--conf, --auth= on argv without a provider": (
            celery_flower("--auth=.*@example.com"), {}, "FLOWER_AUTH_PROVIDER"),
        "--basic-auth on argv (login file set)": (
            celery_flower("--basic-auth=ops:pw"), with_file, "--basic-auth is on the command line"),
        "--basic_auth on argv, no --conf": (
            celery_flower("--basic_auth=ops:pw", conf=False), {}, "--basic_auth is on the command"),
        "FLOWER_BASIC_AUTH (login file set)": (
            celery_flower(), {**with_file, "FLOWER_BASIC_AUTH": "ops:pw"}, "FLOWER_BASIC_AUTH"),
    }  # fmt: skip
    procs = {}
    for name, (cmd, extra, _) in cases.items():  # side by side: the suite stays fast
        port = free_port()
        procs[name] = (port, subprocess.Popen(
            [*cmd, f"--port={port}"], env={**base_env, **extra}, cwd=tmp_path,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        ))  # fmt: skip
    wrong = []
    for name, (port, proc) in procs.items():
        listening = wait_listening(proc, port)
        if listening:
            url = f"http://127.0.0.1:{port}"
            wrong.append(
                f"{name}: started; pages answered {[status(url + p, None) for p in PAGES]}"
            )
        stop(proc)
        assert proc.stdout is not None and proc.stderr is not None
        out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
        lines = [ln for ln in (out + err).splitlines() if ln.strip()]
        expected = cases[name][2]
        if listening:
            continue
        if proc.returncode != 2 or len(lines) != 1 or expected not in lines[0]:
            wrong.append(
                f"{name}: exit {proc.returncode}, wanted one line naming {expected!r}: {lines}"
            )
    assert not wrong, "\n".join(wrong)


@pytest.fixture(scope="module")
def flower_url(
    base_env: dict[str, str], auth_file: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """`colabq flower` as docs/operations/flower.md starts it, with its login file."""
    port = free_port()
    log = tmp_path_factory.mktemp("flower-run") / "flower.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(BIN / "colabq"), "flower", "--port", str(port), "--address", "127.0.0.1"],
            env={**base_env, "COLABQ_FLOWER_AUTH_FILE": auth_file}, cwd=log.parent,
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        assert wait_listening(proc, port), f"colabq flower did not start: {log.read_text()}"
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


@pytest.mark.parametrize("page", PAGES)
def test_colabq_flower_asks_every_page_for_its_login(flower_url: str, page: str) -> None:
    assert status(flower_url + page, None) == 401
    assert status(flower_url + page, (AUTH[0], "wrong")) == 401
    assert status(flower_url + page, AUTH) == 200
