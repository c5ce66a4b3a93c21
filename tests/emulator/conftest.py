"""Fixtures for the emulator's tests: an isolated HOME and COLAB_EMU_HOME, and runners.

`emu.run(...)` runs `ops/colab` with stdin=/dev/null (unless `input` is given) and returns
(rc, stdout, stderr). Teardown unassigns every VM with the admin tool's `kill-all` and checks
that no emulator process of this test survived. `emu` speaks the emulator's default release (the
newest); a module whose tests run once per release (the conformance suite) takes `cli_version`
and builds its emulators with `make_emu(base, cli_version)`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

OPS = Path(__file__).resolve().parents[2] / "ops"
COLAB = OPS / "colab"
COLAB_EMU = OPS / "colab-emu"
if str(OPS) not in sys.path:
    sys.path.insert(0, str(OPS))

from colab_emulator import admin  # noqa: E402
from colab_emulator.vm import find_processes  # noqa: E402

Result = tuple[int, str, str]
# The releases the emulator speaks (COLAB_EMU_VERSION), which are the ones colabq supports.
VERSIONS = ("0.7.4", "0.7.5")


@dataclass
class Emu:
    home: Path
    emu_home: Path
    env: dict[str, str]
    workdir: Path
    procs: list[subprocess.Popen[str]] = field(default_factory=list)

    def run(
        self,
        *args: str,
        input: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 30,
    ) -> Result:
        proc = subprocess.run(
            [sys.executable, str(COLAB), *args],
            input=input,
            stdin=subprocess.DEVNULL if input is None else None,
            capture_output=True,
            text=True,
            env={**self.env, **(env or {})},
            cwd=self.workdir,
            timeout=timeout,
        )
        return proc.returncode, proc.stdout, proc.stderr

    def popen(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, str(COLAB), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**self.env, **(env or {})},
            cwd=self.workdir,
        )
        self.procs.append(proc)
        return proc

    def admin(self, *args: str) -> Result:
        proc = subprocess.run(
            [sys.executable, str(COLAB_EMU), *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=30,
        )
        return proc.returncode, proc.stdout, proc.stderr

    def new(self, name: str, *flags: str) -> str:
        """Allocate `name` and return its endpoint."""
        rc, out, err = self.run("new", "-s", name, *flags)
        assert rc == 0, (out, err)
        return self.endpoint(name)

    def sessions_json(self, config: Path | None = None) -> dict[str, Any]:
        path = config or self.home / ".config" / "colab-cli" / "sessions.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def endpoint(self, name: str) -> str:
        return str(self.sessions_json()[name]["endpoint"])

    def content(self, endpoint: str) -> Path:
        return self.emu_home / "vms" / endpoint / "root" / "content"

    def write(self, name: str, text: str) -> Path:
        path = self.workdir / name
        path.write_text(text)
        return path


def wait_for(predicate: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


def make_emu(base: Path, version: str | None = None) -> Emu:
    """An isolated HOME, COLAB_EMU_HOME and working folder under `base`; the emulator speaks
    `version` (COLAB_EMU_VERSION), else its default."""
    home, emu_home, workdir = base / "home", base / "emu", base / "work"
    for folder in (home, workdir):
        folder.mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "COLAB_EMU_HOME": str(emu_home),
        "TYPER_STANDARD_TRACEBACK": "1",
        **({"COLAB_EMU_VERSION": version} if version else {}),
    }
    return Emu(home=home, emu_home=emu_home, env=env, workdir=workdir)


def tear_down(emulator: Emu) -> None:
    """Kill leftover clients, unassign every VM, and check no process of this home survived."""
    for proc in emulator.procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    # The admin tool in-process: a subprocess per teardown would cost more than most tests.
    assert admin.main(["--home", str(emulator.emu_home), "kill-all"]) == 0
    assert find_processes(f"{emulator.emu_home}::", prefix=True) == []


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def plain(text: str) -> str:
    """`text` without its ANSI colour codes."""
    return ANSI.sub("", text)


@pytest.fixture(scope="module", params=VERSIONS)
def cli_version(request: pytest.FixtureRequest) -> str:
    """Each release in turn, for the tests where the releases differ and the conformance suite
    (module-scoped, so a module's expensive fixtures run once per release)."""
    return str(request.param)


@pytest.fixture
def emu(tmp_path: Path) -> Iterator[Emu]:
    emulator = make_emu(tmp_path)
    yield emulator
    tear_down(emulator)
