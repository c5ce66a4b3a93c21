"""Conformance of `colab whoami` (hidden in 0.7.4): the real command's lines, the emulator home's
account (one home, one account), and a broken login failing it as it fails the other commands."""

from __future__ import annotations

import re
from pathlib import Path

from colab_emulator.faults import set_fault

from .conftest import Emu, make_emu, tear_down

# colab_cli/commands/utility.py `whoami`: five labels padded to one column, the scopes sorted.
SHAPE = re.compile(
    r"Auth provider: (oauth2|adc)\n"
    r"Email:         (?P<email>\S+@\S+)\n"
    r"Audience:      \S+\n"
    r"Expires in:    \d+m\n"
    r"Scopes:\n"
    r"(?P<scopes>(  - \S+\n)+)"
)


def test_whoami_prints_the_homes_account_in_the_real_commands_shape(emu: Emu) -> None:
    rc, out, err = emu.run("whoami")
    assert (rc, err) == (0, "")
    found = SHAPE.fullmatch(out)
    assert found is not None, out
    assert found["email"] == "emulator@colab.example"
    scopes = [line.removeprefix("  - ") for line in found["scopes"].splitlines()]
    assert scopes == sorted(scopes) and "https://www.googleapis.com/auth/colaboratory" in scopes
    assert emu.run("--auth", "adc", "whoami")[1].startswith("Auth provider: adc\n")
    assert emu.admin("set-account", "b@colab.example")[0] == 0
    assert SHAPE.fullmatch(emu.run("whoami")[1])["email"] == "b@colab.example"  # type: ignore[index]
    assert emu.admin("set-account", "not an email")[0] == 2


def test_whoami_is_hidden_and_prints_no_update_banner(emu: Emu) -> None:
    assert emu.admin("set-latest-version", "0.9.0")[0] == 0  # newer than any release emulated
    assert emu.run("status")[1].startswith("\n[colab] A new version")
    rc, out, _ = emu.run("whoami")
    assert rc == 0 and out.startswith("Auth provider: ")
    assert "whoami" not in emu.run("-h")[1]
    assert "Usage: colab whoami [OPTIONS]" in emu.run("whoami", "-h")[1]


def test_two_homes_are_two_accounts(emu: Emu, tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    other = make_emu(tmp_path / "b")
    try:
        assert other.admin("set-account", "b@colab.example")[0] == 0
        emu.new("job1", "--gpu", "T4")
        accounts = [SHAPE.fullmatch(e.run("whoami")[1])["email"] for e in (emu, other)]  # type: ignore[index]
        assert accounts == ["emulator@colab.example", "b@colab.example"]
        assert "[job1]" in emu.run("sessions")[1]
        assert other.run("sessions")[1] == "[colab] No active sessions found on server.\n"
    finally:
        tear_down(other)


def test_a_broken_login_fails_whoami(emu: Emu) -> None:
    set_fault(emu.emu_home, "auth", fail=True, mode="http")
    rc, out, err = emu.run("whoami")
    assert (rc, out) == (1, "")
    assert err.startswith("[colab] whoami: tokeninfo returned HTTP 400: ")
    set_fault(emu.emu_home, "auth", fail=True)
    rc, out, err = emu.run("whoami")
    assert (rc, out) == (1, "Enter the authorization code: ")
    assert err.startswith("To authorize colab-cli, visit this URL in any browser:\n")
