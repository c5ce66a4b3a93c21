"""`ColabCli` driving the offline emulator (`ops/colab`) through a whole session and its faults.

`setup` speaks the emulator's default release (0.7.5); the tests where the releases differ (the
version, the banner, the assignment's retries and a `new` killed by colabq's timeout) take
`release` and run once per release colabq drives.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from worker.colab.driver import ColabCli, check_cli
from worker.colab.parse import StopOutcome
from worker.colab.versions import SUPPORTED, AssignPolicy
from worker.colab.witness import Witness, confirm_gone
from worker.errors import (
    AllocationRefused,
    ColabError,
    ColabNotAuthenticated,
    ColabTimeout,
    ColabTransportError,
    RemotePathNotFound,
    SessionNameInUse,
)
from worker.session.reconcile import Found, reconcile_new

OPS = Path(__file__).resolve().parents[2] / "ops"
if str(OPS) not in sys.path:
    sys.path.insert(0, str(OPS))

from colab_emulator.faults import set_fault  # noqa: E402

pytestmark = pytest.mark.integration


@dataclass
class Setup:
    driver: ColabCli
    env: dict[str, str]
    emu_home: Path
    work: Path

    def admin(self, *args: str) -> str:
        proc = subprocess.run(
            [sys.executable, str(OPS / "colab-emu"), *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=30,
        )
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        return proc.stdout

    def fault(self, command: str, **fields: Any) -> None:
        set_fault(self.emu_home, command, **fields)


@pytest.fixture(params=SUPPORTED)
def release(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def setup(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Setup]:
    home, emu_home, work = tmp_path / "home", tmp_path / "emu", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "COLAB_EMU_HOME": str(emu_home),
    }
    if "release" in request.fixturenames:
        env["COLAB_EMU_VERSION"] = request.getfixturevalue("release")
    # Quick retries (the CLI's own variables, which the driver sets for every call).
    policy = AssignPolicy(request_timeout_s=120.0, retries=3, backoff_s=0.1)
    driver = ColabCli(OPS / "colab", tmp_path / "worker" / "sessions.json", env=env, assign=policy)
    state = Setup(driver, env, emu_home, work)
    yield state
    state.admin("kill-all")


def test_a_session_from_new_to_gone(setup: Setup, release: str) -> None:
    driver, work = setup.driver, setup.work
    assert check_cli(driver).version == release
    assert driver.usage().active_assignments == 0

    driver.new("cq-life", "T4", high_mem=False)
    record = driver.local_record("cq-life")
    assert record is not None
    status = driver.status("cq-life")
    assert status is not None
    assert (status.endpoint, status.hardware, status.variant) == (record.endpoint, "T4", "GPU")
    assert status.busy is False
    assert driver.usage().active_assignments == 1

    script = work / "job.sh"
    script.write_text("echo hello from the job\n")
    driver.upload("cq-life", script, "/content/job.sh")
    assert "job.sh" in driver.ls("cq-life", "content")
    back = work / "back.sh"
    driver.download("cq-life", "/content/job.sh", back)
    assert back.read_text() == script.read_text()
    with pytest.raises(RemotePathNotFound):
        driver.download("cq-life", "/content/nope.txt", work / "nope.txt")
    with pytest.raises(RemotePathNotFound):
        driver.ls("cq-life", "content/nope")

    [listed] = driver.sessions()
    assert (listed.name, listed.endpoint) == ("cq-life", record.endpoint)

    assert driver.stop("cq-life") is StopOutcome.STOPPED
    assert driver.status("cq-life") is None
    assert driver.sessions() == []
    assert driver.stop("cq-life") is StopOutcome.NOT_FOUND
    assert driver.local_record("cq-life") is None


def test_new_refuses_a_recorded_name_so_no_vm_is_orphaned(setup: Setup) -> None:
    setup.driver.new("cq-dup", "L4", high_mem=True)
    with pytest.raises(SessionNameInUse):
        setup.driver.new("cq-dup", "T4", high_mem=False)
    [only] = setup.driver.sessions()
    assert only.name == "cq-dup"


def test_allocation_refused_is_typed_and_leaves_nothing(setup: Setup) -> None:
    setup.fault("new", http=412, times=1)
    with pytest.raises(AllocationRefused):
        setup.driver.new("cq-412", "A100", high_mem=False)
    assert setup.driver.local_record("cq-412") is None
    assert setup.driver.sessions() == []
    setup.driver.new("cq-412", "A100", high_mem=False)  # the fault was for one call only
    assert setup.driver.local_record("cq-412") is not None


def test_an_orphan_shows_as_unnamed(setup: Setup) -> None:
    setup.admin("orphan", "--gpu", "T4")
    [orphan] = setup.driver.sessions()
    assert orphan.name is None


def test_a_stop_that_fails_keeps_the_record_for_a_retry(setup: Setup) -> None:
    setup.driver.new("cq-retry", "T4", high_mem=False)
    setup.fault("stop", http=503, times=1)
    with pytest.raises(ColabTransportError):
        setup.driver.stop("cq-retry")
    assert setup.driver.local_record("cq-retry") is not None
    assert setup.driver.stop("cq-retry") is StopOutcome.STOPPED


def test_the_update_banner_never_reaches_the_parsers(setup: Setup, release: str) -> None:
    setup.admin("set-latest-version", "0.7.6")
    assert setup.driver.status("cq-none") is None
    settings = Path(setup.env["HOME"]) / ".config" / "colab-cli" / "settings.json"
    assert json.loads(settings.read_text())["enable_update_check"] is False
    # Something turns the check back on after the driver's first call: the banner is back.
    settings.write_text(json.dumps({"enable_update_check": True, "latest_version": "0.7.6"}))
    raw = subprocess.run(
        [str(OPS / "colab"), "usage"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=setup.env,
        timeout=30,
    )
    assert f"A new version of Colab CLI is available: 0.7.6 (current: {release})" in raw.stdout
    assert setup.driver.usage().active_assignments == 0
    assert setup.driver.status("cq-none") is None


@pytest.mark.parametrize(
    ("auth", "mode"),
    [(None, "missing"), ("adc", "missing"), ("adc", "refresh")],
)
def test_authentication_failures_are_typed(setup: Setup, auth: str | None, mode: str) -> None:
    driver = ColabCli(
        setup.driver.binary,
        setup.driver.config_path,
        env=setup.env,
        auth="adc" if auth == "adc" else None,
    )
    setup.fault("auth", fail=True, mode=mode)
    with pytest.raises(ColabNotAuthenticated):
        driver.usage()
    with pytest.raises(ColabNotAuthenticated):
        driver.status("cq-none")


def test_exec_argv_runs_a_file_in_the_session(setup: Setup) -> None:
    setup.driver.new("cq-exec", "T4", high_mem=False)
    program = setup.work / "driver.py"
    program.write_text("print('__EXIT__=0')\n")
    argv = setup.driver.exec_argv("cq-exec", program, timeout_s=60)
    proc = subprocess.run(
        argv,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=setup.driver.exec_env(),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "__EXIT__=0" in proc.stdout


def test_a_record_the_cli_pruned_while_its_vm_lives_is_written_again(setup: Setup) -> None:
    """0.7.4 prunes the record of a live VM whose proxy answered 401/404: the witness asks the
    account, writes the record again, and the session answers; a VM really gone stays gone."""
    driver, events = setup.driver, []
    driver.new("cq-pruned", "T4", high_mem=False)
    seen = driver.status("cq-pruned")
    assert seen is not None
    setup.fault("exec", lost=True, times=1)
    cell = setup.work / "cell.py"
    cell.write_text("print('hello')\n")
    with pytest.raises(ColabError):
        driver.exec("cq-pruned", cell, timeout_s=30)
    assert driver.status("cq-pruned") is None, "the CLI pruned its record"
    assert confirm_gone(driver, "cq-pruned", seen.endpoint, events.append) is Witness.RESTORED
    assert "record written again" in events[-1]
    again = driver.status("cq-pruned")
    assert again is not None and again.endpoint == seen.endpoint
    assert driver.exec("cq-pruned", cell, timeout_s=30).strip().endswith("hello")
    # Unassigned under its record: the account no longer holds it, whatever the record says.
    setup.admin("unassign", seen.endpoint)
    assert confirm_gone(driver, "cq-pruned", seen.endpoint, events.append) is Witness.GONE


def test_the_assignment_retries_reach_the_caller_and_assign_once(
    setup: Setup, release: str
) -> None:
    """Two 502s on the assignment POST: 0.7.5 retries (its colab.log lines reach the caller) and
    assigns one VM; 0.7.4 fails at the first, assigning nothing."""
    setup.fault("assign", http=502, times=2)
    seen: list[str] = []
    if release == "0.7.4":
        with pytest.raises(ColabTransportError):
            setup.driver.new("cq-retry", "T4", high_mem=False, on_retry=seen.append)
        assert seen == [] and setup.driver.sessions() == []
        return
    setup.driver.new("cq-retry", "T4", high_mem=False, on_retry=seen.append)
    assert [line.split(" (at ")[0] for line in seen] == [
        "Assignment request failed; retrying in 0s"
    ] * 2
    [listed] = setup.driver.sessions()
    assert listed.name == "cq-retry"


def hasty(setup: Setup) -> ColabCli:
    """A driver whose timeout on `new` is short: one POST of at most 1 s, no retry (the CLI's
    own variables), and 3 s more; its release checked, so that the 0.7.5 worst case holds."""
    driver = ColabCli(setup.driver.binary, setup.driver.config_path, env=setup.env,
                      assign=AssignPolicy(1.0, 0, 0.0), new_margin_s=3.0)  # fmt: skip
    assert check_cli(driver).version == "0.7.5" and driver.new_timeout_s() == 6.0
    return driver


def test_a_new_killed_after_its_record_is_adopted_by_name(setup: Setup) -> None:
    """colabq's timeout fires (a CLI stalled after writing its record): the name's VM is found
    live and adopted; one assignment. (0.7.5, which reads the variables that make the worst case
    short; 0.7.4's is 3 x 120 s whatever colabq sets.)"""
    setup.fault("new", hang=True, stall_at="state", times=1)
    driver = hasty(setup)
    with pytest.raises(ColabTimeout):
        driver.new("cq-slow", "T4", high_mem=False)
    found = reconcile_new(driver, "cq-slow", None, print)
    [listed] = driver.sessions()
    assert (found.found, found.endpoint) == (Found.ADOPTED, listed.endpoint)
    assert listed.name == "cq-slow"


def test_a_new_killed_before_assigning_left_nothing_by_name(setup: Setup) -> None:
    """Killed while it waited on the backend: nothing under the name; an unrelated unnamed
    assignment is reported, never adopted."""
    orphan = setup.admin("orphan", "--gpu", "T4").strip()
    setup.fault("new", delay_s=60, times=1)
    driver = hasty(setup)
    with pytest.raises(ColabTimeout):
        driver.new("cq-slow", "T4", high_mem=False)
    found = reconcile_new(driver, "cq-slow", None, print)
    assert found.found is Found.NOTHING and found.endpoint is None
    assert found.unnamed == (f"{orphan} (T4)",)
    assert [s.endpoint for s in driver.sessions()] == [orphan]
