"""Where colabq reads its settings (issue 25): the environment, over a file named with
`--env-file` (COLABQ_ENV_FILE), over the user's `$XDG_CONFIG_HOME/colabq/settings.env` (else
`~/.config/colabq/settings.env`); never the current folder's `.env` unasked; and a settings file
others can read is refused in one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.unit.settings_env import isolate_settings, user_settings_file, write_private
from worker.errors import ConfigError
from worker.settings import load_settings
from worker.settingsfiles import ENV_FILE_VAR, config_dir, settings_files


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_settings(monkeypatch, tmp_path)


@pytest.mark.parametrize(
    ("xdg", "expected"),
    [
        (None, "{tmp}/home/.config/colabq"),
        ("{tmp}/xdg", "{tmp}/xdg/colabq"),
        ("", "{tmp}/home/.config/colabq"),
        ("relative/config", "{tmp}/home/.config/colabq"),  # the XDG spec: ignore it
    ],
)
def test_the_config_folder_respects_xdg_config_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, xdg: str | None, expected: str
) -> None:
    if xdg is not None:
        monkeypatch.setenv("XDG_CONFIG_HOME", xdg.format(tmp=tmp_path))
    assert config_dir(os.environ) == Path(expected.format(tmp=tmp_path))
    write_private(config_dir(os.environ) / "settings.env", "COLABQ_KEY_PREFIX=from-config\n")
    assert load_settings().key_prefix == "from-config"


def test_the_current_folders_dot_env_is_read_only_when_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    write_private(tmp_path / ".env", "COLABQ_KEY_PREFIX=from-dot-env\n")
    assert settings_files() == () and load_settings().key_prefix == "colabq"
    monkeypatch.setenv(ENV_FILE_VAR, str(tmp_path / ".env"))
    assert load_settings().key_prefix == "from-dot-env"


def test_the_environment_wins_over_the_named_file_over_the_users(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    user = write_private(
        user_settings_file(tmp_path),
        "COLABQ_KEY_PREFIX=user\nCOLABQ_QUEUE_PREFIX=user.\nCOLABQ_LEASE_TTL_S=41\n",
    )
    named = write_private(
        tmp_path / "team.env", "COLABQ_KEY_PREFIX=named\nCOLABQ_QUEUE_PREFIX=named.\n"
    )
    monkeypatch.setenv(ENV_FILE_VAR, str(named))
    monkeypatch.setenv("COLABQ_KEY_PREFIX", "environment")
    assert settings_files() == (user, named)
    s = load_settings()
    assert (s.key_prefix, s.queue_prefix, s.lease_ttl_s) == ("environment", "named.", 41.0)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_settings_file_others_can_read_is_refused(tmp_path: Path, mode: int) -> None:
    path = write_private(user_settings_file(tmp_path), "X=1\n", mode)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == (
        f"The settings file {path} is mode {mode:04o}: others may read it and it may hold the "
        f"Redis password; `chmod 600 {path}`."
    )


def test_a_settings_file_its_owner_alone_reads_is_read(tmp_path: Path) -> None:
    write_private(user_settings_file(tmp_path), "COLABQ_KEY_PREFIX=ro\n", 0o400)
    assert load_settings().key_prefix == "ro"


def test_a_named_file_that_is_missing_or_a_folder_is_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for missing in (tmp_path / "nothere.env", tmp_path):
        monkeypatch.setenv(ENV_FILE_VAR, str(missing))
        with pytest.raises(ConfigError, match=rf"^The settings file {missing} \(--env-file, "):
            load_settings()
