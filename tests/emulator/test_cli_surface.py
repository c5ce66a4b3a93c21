"""The CLI surface without VMs: version, help, usage errors, the update banner, tracebacks."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from colab_emulator.faults import list_faults, set_fault

from .conftest import COLAB, Emu, make_emu, tear_down, wait_for


def banner(latest: str, current: str) -> list[str]:
    return [
        "",
        f"[colab] A new version of Colab CLI is available: {latest} (current: {current})",
        "[colab] Run 'colab update' to update.",
        '[colab] To silence this check, set "enable_update_check": false in '
        "~/.config/colab-cli/settings.json",
        "",
    ]


@pytest.fixture
def emu_as(tmp_path: Path, cli_version: str) -> Iterator[Emu]:
    emulator = make_emu(tmp_path, cli_version)
    yield emulator
    tear_down(emulator)


def test_version_through_the_shebang(emu_as: Emu, cli_version: str) -> None:
    proc = subprocess.run(
        [str(COLAB), "version"],
        capture_output=True,
        text=True,
        env=emu_as.env,
        stdin=subprocess.DEVNULL,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"Version: {cli_version}\n", "")


def test_the_default_release_is_the_newest_and_a_bad_one_is_refused(emu: Emu) -> None:
    assert emu.run("version")[:2] == (0, "Version: 0.7.5\n")
    assert emu.run("version", env={"COLAB_EMU_VERSION": "0.8.0"})[:2] == (0, "Version: 0.8.0\n")
    rc, out, err = emu.run("version", env={"COLAB_EMU_VERSION": "latest"})
    assert (rc, out) == (2, "")
    assert (
        err == "[colab-emulator] COLAB_EMU_VERSION='latest' is not a version (X.Y.Z, e.g. 0.7.4)\n"
    )


def test_help_lists_commands_alphabetically(emu: Emu) -> None:
    for flag in ("-h", "--help"):
        rc, out, _ = emu.run(flag)
        assert rc == 0
        commands_box = out.split("╭─ Commands")[1].splitlines()[1:-1]
        names = [line.split()[1] for line in commands_box]
        assert "exec" in names and "usage" in names
        assert names == sorted(names)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bogus"], "No such command 'bogus'."),
        (["--bogus", "status"], "No such option: --bogus"),
        (
            ["--auth", "kerberos", "status"],
            "Invalid value for '--auth': 'kerberos' is not one of 'oauth2', 'adc'.",
        ),
        (["new", "--gpus", "t4"], "No such option: --gpus Did you mean '--gpu'?"),
        (["new", "--gpu"], "Option '--gpu' requires an argument."),
        (["upload", "-s", "x", "only-one"], "Missing argument 'REMOTE'."),
        (["ls", "-s", "x", "a", "b"], "Got unexpected extra argument (b)"),
        (
            ["exec", "-s", "x", "--timeout", "soon"],
            "Invalid value for '--timeout': 'soon' is not a valid float.",
        ),
    ],
)
def test_usage_errors_exit_2_with_a_boxed_error(emu: Emu, argv: list[str], message: str) -> None:
    rc, out, err = emu.run(*argv)
    assert (rc, out) == (2, "")
    assert "╭─ Error ─" in err
    assert message in err
    assert "Try 'colab" in err


def test_accepted_global_options_are_not_usage_errors(emu: Emu) -> None:
    rc, out, err = emu.run(
        "--auth", "ADC", "--logtostderr", "--config", str(emu.workdir / "s.json"), "status"
    )
    assert (rc, out) == (0, "[colab] No active sessions.\n")
    assert "DEBUG" in err


def test_banner_on_stdout_before_output_and_its_suppression(emu_as: Emu, cli_version: str) -> None:
    emu = emu_as
    rc, out, _ = emu.run("status")
    assert out == "[colab] No active sessions.\n", "no banner unless a newer version is known"
    assert emu.admin("set-latest-version", "0.7.5")[0] == 0
    rc, out, _ = emu.run("status")
    assert rc == 0
    if cli_version == "0.7.5":
        assert out == "[colab] No active sessions.\n", "0.7.5 is the latest: no banner"
        assert emu.admin("set-latest-version", "0.7.6")[0] == 0
        rc, out, _ = emu.run("status")
    latest = "0.7.6" if cli_version == "0.7.5" else "0.7.5"
    assert out.splitlines() == [*banner(latest, cli_version), "[colab] No active sessions."]
    assert emu.run("version")[1] == f"Version: {cli_version}\n", "version skips the check"
    settings = emu.home / ".config" / "colab-cli" / "settings.json"
    settings.write_text(json.dumps({"enable_update_check": False}))
    assert emu.run("status")[1] == "[colab] No active sessions.\n"


def test_standard_and_boxed_tracebacks(emu: Emu) -> None:
    set_fault(emu.emu_home, "sessions", http=500)
    rc, out, err = emu.run("sessions")
    assert (rc, out) == (1, "")
    assert err.startswith("Traceback (most recent call last):")
    assert err.splitlines()[-1] == (
        "colab_cli.client.ColabRequestError: Failed to issue request GET "
        "https://colab.research.google.com/tun/m/assignments: 500 Server Error"
    )
    rc, _, err = emu.run("sessions", env={"TYPER_STANDARD_TRACEBACK": ""})
    assert rc == 1
    assert "╭" in err and "Traceback (most recent call last)" in err.splitlines()[0]
    assert err.splitlines()[-1].startswith("ColabRequestError: Failed to issue request GET")


def test_not_emulated_commands_say_so(emu: Emu) -> None:
    rc, _, err = emu.run("repl")
    assert rc == 2
    assert "not implemented by the offline emulator" in err


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_hang_fault_and_signals_give_130_and_143(emu: Emu, sig: int, code: int) -> None:
    set_fault(emu.emu_home, "usage", hang=True, times=5)
    proc = emu.popen("usage")
    # Taking the fault counts one application: then the command is inside the hang.
    wait_for(lambda: list_faults(emu.emu_home)[0]["times"] == 4)
    time.sleep(0.05)
    assert proc.poll() is None, "hang keeps the command waiting"
    proc.send_signal(sig)
    assert proc.wait(timeout=10) == code
