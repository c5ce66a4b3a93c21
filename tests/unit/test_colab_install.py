"""Which Python a `colab` launcher runs (`worker.colab.install.interpreter`): the shapes uv, pip
and the emulator write. (The exec-path check itself runs on a stand-in install in
tests/cli/test_doctor.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.colab.install import Verdict, check_exec_path, interpreter

PIP_TRAMPOLINE = (
    "#!/bin/sh\n'''exec' \"/very/long/path/venv/bin/python3.12\" \"$0\" \"$@\"\n' '''\nimport sys\n"
)


@pytest.mark.parametrize(
    ("text", "python"),
    [
        ("#!/home/u/.local/share/uv/tools/google-colab-cli/bin/python\nimport sys\n",
         "/home/u/.local/share/uv/tools/google-colab-cli/bin/python"),
        ("#!/usr/bin/env python3\n", "python3"),  # the emulator
        ("#!/usr/bin/python3 -I\n", "/usr/bin/python3"),
        (PIP_TRAMPOLINE, "/very/long/path/venv/bin/python3.12"),
        ("#!/bin/sh\nexec something\n", None),  # a shell wrapper: nothing to check
        ("#!/usr/bin/env bash\n", None),
        ("import sys\n", None),
        ("", None),
    ],
)  # fmt: skip
def test_the_launchers_interpreter(tmp_path: Path, text: str, python: str | None) -> None:
    launcher = tmp_path / "colab"
    launcher.write_text(text)
    assert interpreter(launcher) == python


def test_a_launcher_that_cannot_be_run_is_unknown_not_failed(tmp_path: Path) -> None:
    launcher = tmp_path / "colab"
    launcher.write_text("#!/nonexistent/python\n")
    found = check_exec_path(launcher, {}, 5.0)
    assert found.verdict is Verdict.UNKNOWN and "/nonexistent/python" in found.detail
    assert check_exec_path(tmp_path / "missing", {}, 5.0).verdict is Verdict.UNKNOWN
