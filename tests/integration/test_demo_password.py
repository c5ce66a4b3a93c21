"""The demo's whole path (queue, worker, emulator, local Hub, final report) against a Redis that
needs a password, as a shared deployment's does; the password is never printed. Its job ships a
uv project as a snapshot: the VM runs exactly the commit checked, in the project's environment."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_end_to_end_on_a_password_protected_redis(redis_url: str, tmp_path: Path) -> None:
    password = urlsplit(redis_url).password
    if not password:
        pytest.skip("COLABQ_TEST_REDIS_URL names a Redis without a password")
    env = {**os.environ, "COLABQ_REDIS_URL": redis_url, "HOME": str(tmp_path), "COLUMNS": "200"}
    res = subprocess.run(
        [sys.executable, "-m", "producer.cli", "demo"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert "using the Redis that answers at redis://:***@" in out
    assert "demo passed" in out and password not in out
    checked = re.search(r"code: pass commit ([0-9a-f]{12}): a snapshot", out)
    ran = re.search(r"commit ([0-9a-f]{40}) \(the snapshot colabq shipped\)", out)
    assert checked and ran and ran[1].startswith(checked[1]), out[-3000:]
    assert "uv sync --frozen" in out and "/.venv/bin/python" in out  # the project's environment
