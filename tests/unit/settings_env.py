"""A test's own settings world: no `COLABQ_*` setting of the developer's shell and no settings
file of theirs (HOME is the test's `home/`, XDG_CONFIG_HOME unset), the test's folder current."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import pytest


def isolate_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, also: Iterable[str] = ()
) -> None:
    """Unset every COLABQ_ variable, XDG_CONFIG_HOME and the names in `also`."""
    dropped = {"XDG_CONFIG_HOME", *(name.upper() for name in also)}
    for name in list(os.environ):
        if name.upper().startswith("COLABQ_") or name.upper() in dropped:
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


def user_settings_file(tmp_path: Path) -> Path:
    """The user's settings file under an isolated HOME (its folder made)."""
    path = tmp_path / "home" / ".config" / "colabq" / "settings.env"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def write_private(path: Path, text: str, mode: int = 0o600) -> Path:
    """`text` in `path` (folders made), mode 0600 unless asked otherwise."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path
