"""Where 0.7.4 and 0.7.5 differ (spec §9), each as the real source has it: `Client.assign` of
0.7.5 retries the assignment POST on 502/503/504 or a read timeout, logging the retry in the
CLI's logging format to colab.log only, and asks the GET again before each retry (an assignment
the failed POST made is taken, never made twice); `COLAB_CLI_REQUEST_TIMEOUT` bounds a request.
0.7.4 reads none of this. Also the `assign` fault's schema and `new`'s `stall_at`."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from colab_emulator.faults import FaultError, list_faults, set_fault

from .conftest import Emu, make_emu, tear_down, wait_for

# common.setup_logging: "%(asctime)s - %(name)s - %(levelname)s - %(message)s".
RETRY = re.compile(
    r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - colab_cli\.client - WARNING - "
    r"Assignment request failed; retrying in (\d+)s"
)
QUICK = {"COLAB_CLI_RETRY_BACKOFF": "0.05"}


@pytest.fixture
def emu_as(tmp_path: Path, cli_version: str) -> Iterator[Emu]:
    emulator = make_emu(tmp_path, cli_version)
    yield emulator
    tear_down(emulator)


def retries(emu: Emu) -> list[str]:
    log = emu.home / ".config" / "colab-cli" / "colab.log"
    text = log.read_text() if log.exists() else ""
    return [m[1] for line in text.splitlines() if (m := RETRY.fullmatch(line))]


def assignments(emu: Emu) -> list[dict[str, object]]:
    rc, out, err = emu.admin("billing", "--json")
    assert rc == 0, err
    return list(json.loads(out))


def test_a_502_on_the_assignment_is_retried_by_075_only(emu_as: Emu, cli_version: str) -> None:
    set_fault(emu_as.emu_home, "assign", http=502, times=2)
    rc, out, err = emu_as.run("new", "-s", "j", "--gpu", "t4", env=QUICK)
    if cli_version == "0.7.4":
        assert rc == 1 and err.splitlines()[-1].startswith(
            "colab_cli.client.ColabRequestError: Failed to issue request POST "
            "https://colab.research.google.com/tun/m/assign?nbh="
        )
        assert retries(emu_as) == [] and assignments(emu_as) == []
        assert list_faults(emu_as.emu_home)[0]["times"] == 1, "one POST, no retry"
        return
    assert (rc, out, err) == (0, "[colab] Creating session 'j'...\n[colab] Session READY.\n", "")
    assert retries(emu_as) == ["0", "0"], "one line per retry, in colab.log only"
    assert len(assignments(emu_as)) == 1
    assert list_faults(emu_as.emu_home) == []


def test_075_backs_off_doubling_and_logs_each_retry(emu: Emu) -> None:
    assert emu.run("version")[1] == "Version: 0.7.5\n"  # the default release
    set_fault(emu.emu_home, "assign", http=503, times=2)
    started = time.monotonic()
    rc, _, err = emu.run("new", "-s", "j", "--gpu", "t4", env={"COLAB_CLI_RETRY_BACKOFF": "1"})
    assert rc == 0, err
    assert time.monotonic() - started >= 3.0, "1 s, then 2 s"
    assert retries(emu) == ["1", "2"]


def test_a_post_that_assigned_before_failing_is_found_by_the_get_never_twice(
    emu_as: Emu, cli_version: str
) -> None:
    set_fault(emu_as.emu_home, "assign", http=504, assigned=True, times=1)
    rc, _, err = emu_as.run("new", "-s", "j", "--gpu", "t4", env=QUICK)
    [made] = assignments(emu_as)
    if cli_version == "0.7.4":
        # The server assigned, 0.7.4 failed and wrote nothing: an unnamed ([?]) VM.
        assert rc == 1 and "504 Server Error" in err.splitlines()[-1]
        assert emu_as.run("sessions")[1].startswith(f"[?] {made['endpoint']} ")
        return
    assert rc == 0, err
    assert retries(emu_as) == ["0"]
    assert emu_as.sessions_json()["j"]["endpoint"] == made["endpoint"]


def test_075_gives_up_after_its_retries_and_leaves_no_record(emu_as: Emu, cli_version: str) -> None:
    set_fault(emu_as.emu_home, "assign", http=502, times=10)
    env = {**QUICK, "COLAB_CLI_ASSIGN_RETRIES": "1"}
    rc, _, err = emu_as.run("new", "-s", "j", "--gpu", "t4", env=env)
    assert rc == 1 and "502 Server Error" in err.splitlines()[-1]
    assert retries(emu_as) == (["0"] if cli_version == "0.7.5" else [])
    assert emu_as.sessions_json() == {} and assignments(emu_as) == []
    posts = 10 - list_faults(emu_as.emu_home)[0]["times"]
    assert posts == (2 if cli_version == "0.7.5" else 1)


@pytest.mark.parametrize("status", [412, 400])
def test_refusals_are_never_retried(emu_as: Emu, status: int) -> None:
    set_fault(emu_as.emu_home, "assign", http=status, times=5)
    rc, _, err = emu_as.run("new", "-s", "j", "--gpu", "h100", env=QUICK)
    assert rc == 1
    said = {412: "[colab] Allocation refused", 400: "[colab] Backend rejected accelerator"}
    assert err.startswith(said[status])
    assert list_faults(emu_as.emu_home)[0]["times"] == 4 and retries(emu_as) == []


def test_the_request_timeout_variable_is_075s(emu_as: Emu, cli_version: str) -> None:
    # A POST answered after 1 s: within google-auth's 120 s (0.7.4), past the 0.3 s 0.7.5 was
    # given, so 0.7.5 reads a timeout, retries, and the second POST is answered at once.
    set_fault(emu_as.emu_home, "assign", delay_s=1, times=1)
    env = {**QUICK, "COLAB_CLI_REQUEST_TIMEOUT": "0.3"}
    rc, _, err = emu_as.run("new", "-s", "j", "--gpu", "t4", env=env)
    assert rc == 0, err
    assert retries(emu_as) == (["0"] if cli_version == "0.7.5" else [])
    assert len(assignments(emu_as)) == 1


def test_a_read_timeout_on_the_last_post_is_requests_own(emu: Emu) -> None:
    # 0.7.5 (the default release): 0.7.4 would wait google-auth's 120 s.
    set_fault(emu.emu_home, "assign", http="timeout", times=1)
    env = {"COLAB_CLI_REQUEST_TIMEOUT": "0.2", "COLAB_CLI_ASSIGN_RETRIES": "0"}
    rc, _, err = emu.run("new", "-s", "j", "--gpu", "t4", env=env)
    assert rc == 1
    assert err.splitlines()[-1] == (
        "requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='colab.research.google.com', "
        "port=443): Read timed out. (read timeout=0.2)"
    )


def test_retries_reach_stderr_only_under_logtostderr(emu: Emu) -> None:
    set_fault(emu.emu_home, "assign", http=502, times=1)
    rc, out, err = emu.run("--logtostderr", "new", "-s", "j", "--gpu", "t4", env=QUICK)
    assert rc == 0 and "[colab] Session READY." in out
    assert any(RETRY.fullmatch(line) for line in err.splitlines())


def test_stall_at_state_keeps_new_running_after_its_record_is_written(emu: Emu) -> None:
    set_fault(emu.emu_home, "new", hang=True, stall_at="state", times=1)
    proc = emu.popen("new", "-s", "j", "--gpu", "t4")
    wait_for(lambda: "j" in emu.sessions_json(), timeout_s=30)
    assert proc.poll() is None, "the record is written, READY not yet"
    proc.kill()
    proc.communicate()
    [made] = assignments(emu)
    assert emu.sessions_json()["j"]["endpoint"] == made["endpoint"]


@pytest.mark.parametrize(
    ("command", "fields"),
    [("assign", {"http": "timeout", "assigned": "yes"}), ("assign", {"http": 200}),
     ("assign", {"serve_gpu": "T4"}), ("new", {"http": "timeout"}),
     ("new", {"stall_at": "ready"})],
)  # fmt: skip
def test_assign_and_stall_faults_are_validated(
    emu: Emu, command: str, fields: dict[str, object]
) -> None:
    with pytest.raises(FaultError):
        set_fault(emu.emu_home, command, **fields)
