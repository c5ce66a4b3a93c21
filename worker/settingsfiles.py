"""Where colabq's settings files are, and whether they may be read.

Settings come from the environment (`COLABQ_*`) over two dotenv files (`NAME=value` lines):

- the user's settings file, `$XDG_CONFIG_HOME/colabq/settings.env` (an absolute XDG_CONFIG_HOME
  only, as the XDG spec says), else `~/.config/colabq/settings.env`, read when it exists;
- a file the user names (`colabq --env-file PATH`, which sets `COLABQ_ENV_FILE` for the command
  and every process it starts), over the user's. A `.env` in the current folder is read only so:
  a training repository's folder is no place for the Redis password.

Either may hold a password, so each must be its owner's alone (mode 0600 or 0400): one that
others can read is refused in one line, as a token file is (a warning would leave the password
readable for as long as nobody reads it). Standard library only: the observers read these too
(`worker.records.forward`), and the fast path of `colabq status` (`producer.clictx`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from worker.errors import ConfigError

ENV_FILE_VAR = "COLABQ_ENV_FILE"
FILE_NAME = "settings.env"


def config_dir(environ: Mapping[str, str]) -> Path:
    """`$XDG_CONFIG_HOME/colabq`, else `~/.config/colabq`."""
    xdg = environ.get("XDG_CONFIG_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "colabq"
    home = environ.get("HOME") or os.path.expanduser("~")
    return Path(home) / ".config" / "colabq"


def user_file(environ: Mapping[str, str]) -> Path:
    return config_dir(environ) / FILE_NAME


def named_file(environ: Mapping[str, str]) -> Path | None:
    """The file `--env-file` (COLABQ_ENV_FILE) names, or None."""
    raw = environ.get(ENV_FILE_VAR, "").strip()
    return Path(raw).expanduser() if raw else None


def settings_files(environ: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """The files to read, the lowest priority first: the user's (if it exists), then the named
    one. A ConfigError for a named file that is missing, or either one that others can read."""
    env = os.environ if environ is None else environ
    found = []
    user = user_file(env)
    if user.exists():
        found.append(check_private(user, "the settings file"))
    named = named_file(env)
    if named is not None:
        if not named.is_file():
            raise ConfigError(
                f"The settings file {named} (--env-file, {ENV_FILE_VAR}) is not a file: name an "
                f"existing one, or put the settings in {user}."
            )
        found.append(check_private(named, "the settings file"))
    return tuple(found)


def check_private(path: Path, what: str) -> Path:
    """`path`, if it is a file only its owner can read or write; else a ConfigError line."""
    try:
        info = path.stat()
    except OSError as exc:
        raise ConfigError(
            f"Cannot read {what} {path} ({exc.strerror}): fix its permissions."
        ) from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{what.capitalize()} {path} is not a file: make it one, or remove it.")
    if info.st_mode & 0o077:
        mode = f"{stat.S_IMODE(info.st_mode):04o}"
        raise ConfigError(
            f"{what.capitalize()} {path} is mode {mode}: others may read it and it may hold the "
            f"Redis password; `chmod 600 {path}`."
        )
    return path
