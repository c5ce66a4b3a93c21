"""Where one emulator process keeps everything, resolved once at start from flags and environment.

The local CLI state lives under `$HOME/.config/colab-cli/` (sessions.json may move with
`--config`); the emulated Google side lives in `$COLAB_EMU_HOME` (default `~/.colab-emulator`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

DEFAULT_EMU_DIR = ".colab-emulator"


class EmuContext(NamedTuple):
    home: Path
    cli_dir: Path
    config_path: Path
    emu_home: Path
    auth: str
    log_to_stderr: bool
    standard_traceback: bool
    time_scale: float
    passthrough: tuple[str, ...]
    environ: Mapping[str, str]

    @property
    def settings_path(self) -> Path:
        return self.cli_dir / "settings.json"

    @property
    def history_dir(self) -> Path:
        return self.cli_dir / "history"

    @property
    def log_path(self) -> Path:
        return self.cli_dir / "colab.log"


def home_dir(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("HOME") or os.path.expanduser("~"))


def emu_home_from(environ: Mapping[str, str]) -> Path:
    """`$COLAB_EMU_HOME`, else `~/.colab-emulator`; always absolute."""
    raw = environ.get("COLAB_EMU_HOME")
    path = Path(raw).expanduser() if raw else home_dir(environ) / DEFAULT_EMU_DIR
    return Path(os.path.abspath(path))


def time_scale_from(environ: Mapping[str, str]) -> float:
    """`COLAB_EMU_TIME_SCALE`: emulated seconds of billing per real second (default 1)."""
    try:
        scale = float(environ.get("COLAB_EMU_TIME_SCALE", "1"))
    except ValueError:
        return 1.0
    return scale if scale > 0 else 1.0


def build_context(
    environ: Mapping[str, str],
    *,
    config: str | None = None,
    auth: str = "oauth2",
    log_to_stderr: bool = False,
) -> EmuContext:
    home = home_dir(environ)
    cli_dir = home / ".config" / "colab-cli"
    if config:
        config_path = Path(os.path.abspath(os.path.expanduser(config)))
    else:
        config_path = cli_dir / "sessions.json"
    standard_tb = any(
        environ.get(var, "") not in ("", "0")
        for var in ("TYPER_STANDARD_TRACEBACK", "_TYPER_STANDARD_TRACEBACK")
    )
    passthrough = tuple(
        name.strip() for name in environ.get("COLAB_EMU_PASSTHROUGH", "").split(",") if name.strip()
    )
    return EmuContext(
        home=home,
        cli_dir=cli_dir,
        config_path=config_path,
        emu_home=emu_home_from(environ),
        auth=auth,
        log_to_stderr=log_to_stderr,
        standard_traceback=standard_tb,
        time_scale=time_scale_from(environ),
        passthrough=passthrough,
        environ=dict(environ),
    )
