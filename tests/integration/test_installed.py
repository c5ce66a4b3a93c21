"""An installed colabq works: the wheel is built, installed into a fresh virtual environment
outside the repository, and a job runs through it (its worker, its `colabq`, the files its
worker uploads to the VM). A file the package data misses fails the job before allocation."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from tests.integration.conftest import Fleet, stop_worker
from worker.states import JobState

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def _install_wheel(root: Path) -> Path:
    wheels = root / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert build.returncode == 0, build.stdout + build.stderr
    [wheel] = wheels.glob("colabq-*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
         str(wheel)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    # Its dependencies come from the test's environment (already pinned and installed), after
    # its own site-packages: colabq itself is the wheel's, never the repository's.
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(site, "colabq-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


def test_a_job_runs_through_an_installed_wheel(fleet: Fleet) -> None:
    venv = _install_wheel(fleet.root)
    away = fleet.root / "elsewhere"  # not the repository: nothing imported from a checkout
    away.mkdir()
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import worker, producer; print(worker.__file__)"],
        cwd=away, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert str(venv) in where and str(ROOT) not in where, where

    fleet.kill_worker()  # the repository's worker makes way for the installed one
    env = {**fleet.env, "PATH": f"{venv / 'bin'}:{fleet.env['PATH']}"}
    env.pop("PYTHONPATH", None)
    log = fleet.root / "installed-worker.log"
    queue = f"{env['COLABQ_QUEUE_PREFIX']}gpu.t4"
    with open(log, "ab") as out:
        fleet.proc = subprocess.Popen(
            [str(venv / "bin" / "python"), "-m", "celery", "-A", "worker.celery_app", "worker",
             "-Q", queue,
             "-c", "1", "-n", f"installed-{secrets.token_hex(3)}@%h", "-l", "INFO"],
            env=env, cwd=away, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while b"ready." not in log.read_bytes():
            assert fleet.proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        script = away / "job.sh"
        script.write_text("echo from-the-wheel\n")
        res = subprocess.run(
            [str(venv / "bin" / "colabq"), "submit", str(script), "--name", "installed-run",
             "--wall", "10m", "--local-store", str(fleet.root / "store"), "--json",
             "--waive", "config-diff", "--waive", "paths", "--waive", "monitoring"],
            env=env, cwd=away, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert res.returncode == 0, res.stdout + res.stderr
        job_id = json.loads(res.stdout)["jobs"][0]["job_id"]
        assert fleet.wait_terminal(job_id, timeout_s=120) is JobState.SUCCEEDED, fleet.ledger.get(
            job_id
        ).reason
        assert "from-the-wheel" in fleet.output(job_id)
    finally:
        stop_worker(fleet.proc)
