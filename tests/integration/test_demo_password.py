"""The demo's whole path (queue, worker, emulator, local Hub, final report) as a user runs it from
a clone in a folder only its owner can enter (a 0700 home, `mktemp -d`), against a Redis that
needs a password, as a shared deployment's does; the password is never printed. Its job ships a
uv project as a snapshot: the VM runs exactly the commit checked, in the project's environment,
as the VM's unprivileged user, with the VM's uv (issue 25: it was a link into the clone's .venv,
which that user cannot enter)."""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def private_clone(home: Path) -> Path:
    """This checkout's files (tracked, and untracked but not ignored: the code under test,
    committed or not) in `home` (0700), with a `.venv` of its own there: this interpreter's
    base, this venv's packages (a path line, so the clone's own code comes first) and a uv of its
    own beside its python, as `make demo` makes it (the one the emulator gives its VMs)."""
    home.mkdir(mode=0o700)
    clone = home / "colabq"
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True, check=True, timeout=60,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, clone / name)
    venv = clone / ".venv"
    base = os.path.realpath(sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    (site_dir,) = venv.glob("lib/python3*/site-packages")
    (site_dir / "worktree-packages.pth").write_text(site.getsitepackages()[0] + "\n")
    uv = Path(sys.executable).parent / "uv"
    try:
        os.link(uv, venv / "bin" / "uv")
    except OSError:  # another file system
        shutil.copy2(uv, venv / "bin" / "uv")
    return clone


def test_the_demo_from_a_private_clone_on_a_password_protected_redis(
    redis_url: str, tmp_path: Path
) -> None:
    password = urlsplit(redis_url).password
    if not password:
        pytest.skip("COLABQ_TEST_REDIS_URL names a Redis without a password")
    clone = private_clone(tmp_path / "home")
    python = clone / ".venv" / "bin" / "python3"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("COLABQ_", "VIRTUAL_ENV"))},
        "COLABQ_REDIS_URL": redis_url, "HOME": str(tmp_path / "home"), "COLUMNS": "200",
        "PYTHONPATH": str(clone),  # the clone's code, in the demo's worker process too
    }  # fmt: skip
    res = subprocess.run(
        [str(python), "-m", "producer.cli", "demo"], cwd=clone, env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert f"offline emulator {clone / 'ops' / 'colab'}" in out  # the clone's, not this tree's
    assert "using the Redis that answers at redis://:***@" in out
    assert "demo passed" in out and password not in out
    checked = re.search(r"code: pass commit ([0-9a-f]{12}): a snapshot", out)
    ran = re.search(r"commit ([0-9a-f]{40}) \(the snapshot colabq shipped\)", out)
    assert checked and ran and ran[1].startswith(checked[1]), out[-3000:]
    assert "uv sync --frozen" in out and "/.venv/bin/python" in out  # the project's environment
