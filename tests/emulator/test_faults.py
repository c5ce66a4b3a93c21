"""Fault injection: the schema, and every fault as a `colab` invocation sees it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from colab_emulator.faults import FaultError, clear_faults, list_faults, set_fault, take_fault

from .conftest import Emu

ASSIGNMENTS = "https://colab.research.google.com/tun/m/assignments"
FAILED_GET = "colab_cli.client.ColabRequestError: Failed to issue request GET"


@pytest.mark.parametrize(
    ("command", "fields", "ok"),
    [
        ("new", {"http": 412}, True),
        ("new", {"http": "network", "times": 2}, True),
        ("new", {"kill_after": "state"}, True),
        ("new", {"kill_after": "later"}, False),
        ("new", {"http": 200}, False),
        ("new", {"fail": "x"}, False),
        ("status", {"http": 401, "match_session": "a"}, True),
        ("status", {"delay_s": -1}, False),
        ("upload", {"fail": "disk full", "delay_s": 0.5}, True),
        ("upload", {"fail": True}, False),
        ("exec", {"hang": True}, True),
        ("exec", {"lost": True, "on_lost": "timeout"}, True),
        ("exec", {"on_lost": "maybe"}, False),
        ("auth", {"fail": True, "mode": "refresh"}, True),
        ("auth", {"mode": "sometimes"}, False),
        ("teleport", {}, False),
        ("ls", {"times": 0}, False),
    ],
)
def test_fault_schema(tmp_path: Path, command: str, fields: dict[str, Any], ok: bool) -> None:
    if ok:
        assert set_fault(tmp_path, command, **fields) == {"command": command, **fields}
        assert list_faults(tmp_path) == [{"command": command, **fields}]
    else:
        with pytest.raises(FaultError):
            set_fault(tmp_path, command, **fields)
        assert list_faults(tmp_path) == []


def test_times_and_match_session_and_clear(tmp_path: Path) -> None:
    set_fault(tmp_path, "upload", fail="generic", times=2)
    set_fault(tmp_path, "upload", fail="only a", match_session="a")
    set_fault(tmp_path, "ls", fail="x")
    assert take_fault(tmp_path, "upload", "a")["fail"] == "only a", "a session-specific fault wins"
    assert take_fault(tmp_path, "upload", "b")["fail"] == "generic"
    assert take_fault(tmp_path, "upload", "b")["fail"] == "generic"
    assert take_fault(tmp_path, "upload", "b") == {}, "times=2 removed it after two applications"
    assert take_fault(tmp_path, "download", "b") == {}
    clear_faults(tmp_path, "upload")
    assert [f["command"] for f in list_faults(tmp_path)] == ["ls"]
    clear_faults(tmp_path)
    assert list_faults(tmp_path) == []


def test_admin_tool_sets_and_rejects_faults(emu: Emu) -> None:
    assert emu.admin("faults", "set", "new", '{"http": 412}')[0] == 0
    rc, _, err = emu.admin("faults", "set", "new", '{"bogus": 1}')
    assert rc == 2 and "bogus" in err
    assert emu.admin("faults", "clear")[0] == 0
    assert list_faults(emu.emu_home) == []


def _active(emu: Emu) -> str:
    return emu.run("usage")[1].splitlines()[2]


def test_new_412_and_400(emu: Emu) -> None:
    set_fault(emu.emu_home, "new", http=412)
    rc, out, err = emu.run("new", "-s", "a", "--gpu", "t4")
    assert (rc, out) == (1, "[colab] Creating session 'a'...\n")
    assert err.startswith(
        "[colab] Allocation refused (precondition failed). This can mean too many"
    )
    set_fault(emu.emu_home, "new", http=400)
    rc, _, err = emu.run("new", "-s", "a", "--gpu", "h100")
    assert rc == 1
    assert err.startswith(
        "[colab] Backend rejected accelerator 'H100'. You may not have quota or entitlement for "
        "this accelerator on your account. Try a different one (e.g. --gpu T4) or omit "
        "--gpu/--tpu for a CPU runtime."
    )
    rc, _, err = emu.run("new", "-s", "a")
    last = err.splitlines()[-1]
    assert rc == 1 and last.startswith(
        "colab_cli.client.ColabRequestError: Failed to issue request POST "
    )
    assert last.endswith(": 400 Client Error")
    assert _active(emu) == "Active assignments: 0"
    assert emu.sessions_json() == {}


@pytest.mark.parametrize(
    ("status", "last_line"),
    [
        (
            500,
            "colab_cli.client.ColabRequestError: Failed to issue request GET https://colab.research.google.com/tun/m/assign?",
        ),
        (
            "network",
            "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='colab.research.",
        ),
    ],
)
def test_new_other_failures_are_tracebacks(emu: Emu, status: Any, last_line: str) -> None:
    set_fault(emu.emu_home, "new", http=status)
    rc, _, err = emu.run("new", "-s", "a", "--gpu", "t4")
    assert rc == 1 and err.splitlines()[-1].startswith(last_line)


def test_new_killed_after_assign_leaves_an_untracked_vm(emu: Emu) -> None:
    set_fault(emu.emu_home, "new", kill_after="assign")
    rc, out, _ = emu.run("new", "-s", "a", "--gpu", "t4")
    assert (rc, out) == (-9, "[colab] Creating session 'a'...\n")
    assert emu.sessions_json() == {}
    assert emu.run("sessions")[1].startswith("[?] gpu-")


def test_new_killed_after_state_has_a_record_but_no_ready(emu: Emu) -> None:
    set_fault(emu.emu_home, "new", kill_after="state", match_session="a")
    rc, out, _ = emu.run("new", "-s", "a", "--gpu", "t4")
    assert (rc, out) == (-9, "[colab] Creating session 'a'...\n")
    assert emu.run("sessions")[1].startswith("[a] gpu-")
    assert emu.run("new", "-s", "b")[0] == 0, "match_session leaves other sessions alone"


@pytest.mark.parametrize(
    ("command", "status", "last_line"),
    [
        (
            "status",
            401,
            f"{FAILED_GET} {ASSIGNMENTS}: 401 Client Error",
        ),
        (
            "sessions",
            500,
            f"{FAILED_GET} {ASSIGNMENTS}: 500 Server Error",
        ),
        ("status", "network", "requests.exceptions.ConnectionError: HTTPSConnectionPool("),
    ],
)
def test_listing_failures_are_tracebacks_and_keep_records(
    emu: Emu, command: str, status: Any, last_line: str
) -> None:
    emu.new("a")
    set_fault(emu.emu_home, command, http=status, times=1)
    rc, out, err = emu.run(command)
    assert (rc, out) == (1, "")
    assert err.splitlines()[-1].startswith(last_line)
    assert "a" in emu.sessions_json()
    assert emu.run(command)[0] == 0, "times=1: the next call succeeds"


def test_stop_failure_keeps_the_record_for_a_retry(emu: Emu) -> None:
    ep = emu.new("a")
    set_fault(emu.emu_home, "stop", http=500, times=1)
    rc, out, err = emu.run("stop", "-s", "a")
    assert (rc, out) == (1, "[colab] Stopping session 'a'...\n")
    assert err.splitlines()[-1] == (
        f"colab_cli.client.ColabRequestError: Failed to issue request GET "
        f"https://colab.research.google.com/tun/m/unassign/{ep}: 500 Server Error"
    )
    assert "a" in emu.sessions_json() and _active(emu) == "Active assignments: 1"
    assert emu.run("stop", "-s", "a")[0] == 0
    assert _active(emu) == "Active assignments: 0"


def test_usage_failure_is_a_warning_line(emu: Emu) -> None:
    set_fault(emu.emu_home, "usage", http=500)
    assert emu.run("usage") == (
        1,
        "",
        "[colab] Warning: failed to fetch compute-unit info: Failed to issue request GET "
        "https://colab.research.google.com/tun/m/ccu-info: 500 Server Error\n",
    )


@pytest.mark.parametrize(
    ("command", "prefix"),
    [
        ("upload", "Upload failed: "),
        ("download", "Download failed: "),
        ("ls", "Error: "),
        ("rm", "Error: "),
    ],
)
def test_file_command_failures_and_delay(emu: Emu, command: str, prefix: str) -> None:
    ep = emu.new("a")
    emu.write("f.txt", "x")
    argv = {
        "upload": ("f.txt", "/content/f.txt"),
        "download": ("/content/f.txt", "g.txt"),
        "ls": (),
        "rm": ("/content/f.txt",),
    }[command]

    def run() -> tuple[int, str, str]:
        (emu.content(ep) / "f.txt").write_text("x")
        return emu.run(command, "-s", "a", *argv)

    set_fault(emu.emu_home, command, fail="disk full", match_session="other")
    rc, out, _ = run()
    assert rc == 0 and "disk full" not in out, "a fault for another session does not apply"
    set_fault(emu.emu_home, command, fail="disk full", delay_s=0.4, match_session="a")
    started = time.monotonic()
    assert run() == (1, f"[colab] {prefix}disk full\n", "")
    assert time.monotonic() - started >= 0.4
    clear_faults(emu.emu_home)
    assert run()[0] == 0


def test_exec_lost_deletes_the_record_only(emu: Emu) -> None:
    emu.new("a")
    set_fault(emu.emu_home, "exec", lost=True)
    assert emu.run("exec", "-s", "a", input="print(1)") == (
        1,
        "[colab] Session 'a' appears to be lost (404/401). Cleaning up.\n",
        "",
    )
    assert emu.sessions_json() == {}
    assert emu.run("sessions")[1].startswith("[?] cpu-"), "the VM itself was not released"


def test_auth_failures(emu: Emu) -> None:
    set_fault(emu.emu_home, "auth", fail=True)
    rc, _, err = emu.run("--auth", "adc", "usage")
    assert rc == 1 and err.startswith(
        "[colab] Warning: failed to fetch compute-unit info: "
        "Your default credentials were not found."
    )
    rc, _, err = emu.run("--auth", "adc", "status")
    assert rc == 1 and err.splitlines()[-1].startswith(
        "google.auth.exceptions.DefaultCredentialsError: Your default credentials were not found."
    )
    rc, out, err = emu.run("usage")
    assert (rc, out) == (1, "Enter the authorization code: ")
    assert err.startswith("To authorize colab-cli, visit this URL in any browser:\n")
    assert err.endswith(
        "[colab] Warning: failed to fetch compute-unit info: EOF when reading a line\n"
    )
    rc, _, err = emu.run("sessions")
    assert rc == 1 and err.endswith("Aborted.\n")
    set_fault(emu.emu_home, "auth", fail=True, mode="http")
    rc, _, err = emu.run("--auth", "adc", "sessions")
    assert rc == 1 and err.splitlines()[-1].endswith(f"{ASSIGNMENTS}: 401 Client Error")


def test_adc_refresh_failure_is_swallowed_only_with_an_empty_store(emu: Emu) -> None:
    set_fault(emu.emu_home, "auth", fail=True, mode="refresh")
    rc, out, err = emu.run("--auth", "adc", "status")
    assert (rc, out) == (0, "[colab] No active sessions.\n")
    assert err.startswith("No valid default credentials found. To authenticate, run:\n")
    assert emu.run("--auth", "adc", "usage")[0] == 1
    clear_faults(emu.emu_home)
    emu.new("a")
    set_fault(emu.emu_home, "auth", fail=True, mode="refresh")
    rc, out, _ = emu.run("--auth", "adc", "status")
    assert (rc, out) == (1, "")


def test_delay_slows_a_command_down(emu: Emu) -> None:
    set_fault(emu.emu_home, "status", delay_s=0.5)
    started = time.monotonic()
    assert emu.run("status")[0] == 0
    assert time.monotonic() - started >= 0.5
