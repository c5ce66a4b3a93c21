"""A real `mlflow server` (SQLite backend), once per test process: the tracker tests and the
integration test of a job that logs to MLflow share it (`tests/conftest.py` registers it; the
suite keeps those tests in one process, `xdist_group("mlflow")`, so one server starts)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from producer.broker import free_port

START_TIMEOUT_S = 300.0  # seconds on an idle machine; minutes on a loaded CI host


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The test that starts the server gets the start's time on top of the usual limit: the
    limit (pytest-timeout) counts fixture setup too."""
    for item in items:
        if "mlflow_uri" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.timeout(START_TIMEOUT_S + 120))


def _mlflow_bin() -> Path | None:
    here = Path(sys.executable).parent / "mlflow"
    return here if here.is_file() else None


@pytest.fixture(scope="session")
def mlflow_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a real MLflow tracking server, up for the whole session."""
    exe = _mlflow_bin()
    if exe is None:
        msg = "the `mlflow` package (dev extra) is needed for the tracker tests"
        if os.environ.get("COLABQ_REQUIRE_SERVICES") or os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    root = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (root / "server.log").open("wb")
    proc = subprocess.Popen(
        [
            str(exe), "server", "--backend-store-uri", f"sqlite:///{root}/mlflow.db",
            "--default-artifact-root", str(root / "artifacts"), "--host", "127.0.0.1",
            "--port", str(port), "--workers", "1",
        ],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"mlflow server exited: {(root / 'server.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"mlflow server not up in {START_TIMEOUT_S:.0f}s")
            time.sleep(0.5)
        yield url
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        log.close()
