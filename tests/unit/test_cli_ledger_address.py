"""What `colabq status` reads of the settings without pydantic-settings (`ledger_address`) is
what the settings object says, valid or not, in the same one line; any other setting set (or a
settings file that may set one) makes it build the settings object. And `print_line` prints as
rich."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.text import Text

from producer import clictx
from producer.clictx import LEDGER_DEFAULTS, ledger_address, print_line
from tests.unit.settings_env import isolate_settings, user_settings_file
from worker.errors import ConfigError
from worker.settings import Settings, load_settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No setting of the developer's shell or settings file: each test sets what it reads."""
    isolate_settings(monkeypatch, tmp_path)


Said = tuple[object, ...] | str


def _settings_say() -> Said:
    try:
        s = load_settings()
    except ConfigError as exc:
        return str(exc)
    return s.redis_url, s.key_prefix, s.redis_master_name, s.sentinel_login()


def _address_says(monkeypatch: pytest.MonkeyPatch) -> tuple[Said, bool]:
    """`ledger_address()` (or its error line), and whether it built the settings object."""
    built: list[bool] = []

    def spy(**overrides: object) -> Settings:
        built.append(True)
        return load_settings(**overrides)

    monkeypatch.setattr(clictx, "load_settings", spy)
    try:
        got: Said = tuple(vars(ledger_address()).values())  # type: ignore[assignment]
    except ConfigError as exc:
        got = str(exc)
    return got, bool(built)


SENTINELS = "sentinel://s1:26379;sentinel://:pw@s2:26380/3"
# (environment, the settings file's text or None, the settings object built)
CASES: list[tuple[dict[str, str], str | None, bool]] = [
    ({}, None, False),
    ({"COLABQ_REDIS_URL": "redis://cache.internal:7000/2"}, None, False),
    ({"colabq_key_prefix": "team-a", "COLABQ_REDIS_URL": "unix:///run/r.sock?db=1"}, None, False),
    ({"COLABQ_KEY_PREFIX": "bad prefix"}, None, False),
    ({"COLABQ_KEY_PREFIX": ""}, None, False),
    ({"COLABQ_REDIS_URL": "redis://h:0/0"}, None, False),
    ({"COLABQ_REDIS_URL": "http://x", "COLABQ_KEY_PREFIX": "bad prefix"}, None, False),
    ({"COLABQ_REDIS_URL": "redis://h/x"}, None, False),
    ({}, "OTHER_TOOL=1\n", False),
    ({"COLABQ_LEASE_TTL_S": "45"}, None, True),
    ({"COLABQ_POLL_INTERVAL_S": "nan", "COLABQ_KEY_PREFIX": "team"}, None, True),
    ({"COLABQ_KEY_PREFIX": "a", "colabq_key_prefix": "b"}, None, True),
    ({"COLABQ_UNKNOWN": "1"}, None, True),
    ({}, "COLABQ_KEY_PREFIX=from-dot-env\n", True),
    ({"COLABQ_KEY_PREFIX": "env-wins"}, "colabq_key_prefix=dot-env-loses\n", True),
    ({}, "COLABQ_REDIS_URL=ftp://nope\n", True),
    # Sentinel: the master's name is read, required, and read only with a sentinel:// URL.
    ({"COLABQ_REDIS_URL": SENTINELS, "COLABQ_REDIS_MASTER_NAME": "mymaster"}, None, False),
    ({"COLABQ_REDIS_URL": SENTINELS}, None, False),
    ({"COLABQ_REDIS_URL": SENTINELS, "COLABQ_REDIS_MASTER_NAME": " "}, None, False),
    ({"COLABQ_REDIS_URL": SENTINELS, "COLABQ_REDIS_MASTER_NAME": "my master"}, None, False),
    ({"COLABQ_REDIS_URL": "sentinel://a:1/1;sentinel://b:2/2"}, None, False),
    ({"COLABQ_REDIS_MASTER_NAME": "ignored"}, None, False),
    ({"COLABQ_REDIS_URL": SENTINELS}, "COLABQ_REDIS_MASTER_NAME=fromfile\n", True),
    # The sentinels' own login: read there too, checked as the settings check it.
    ({"COLABQ_REDIS_URL": SENTINELS, "COLABQ_REDIS_MASTER_NAME": "m",
      "COLABQ_REDIS_SENTINEL_PASSWORD": "s3cret"}, None, False),
    ({"COLABQ_REDIS_URL": SENTINELS, "COLABQ_REDIS_MASTER_NAME": "m",
      "COLABQ_REDIS_SENTINEL_USERNAME": "watcher", "COLABQ_REDIS_SENTINEL_PASSWORD": "s3"}, None,
     False),
    ({"COLABQ_REDIS_URL": SENTINELS, "COLABQ_REDIS_MASTER_NAME": "m",
      "COLABQ_REDIS_SENTINEL_USERNAME": "watcher"}, None, False),
    ({"COLABQ_REDIS_SENTINEL_USERNAME": "two words", "COLABQ_REDIS_SENTINEL_PASSWORD": "x"},
     None, False),
    ({"COLABQ_REDIS_SENTINEL_PASSWORD": ""}, None, False),
    ({"COLABQ_REDIS_URL": SENTINELS, "COLABQ_REDIS_MASTER_NAME": "m"},
     "COLABQ_REDIS_SENTINEL_PASSWORD=fromfile\n", True),
]  # fmt: skip


@pytest.mark.parametrize(("env", "dot_env", "builds"), CASES)
def test_the_ledger_address_is_what_the_settings_say(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str],
    dot_env: str | None, builds: bool,
) -> None:  # fmt: skip
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if dot_env is not None:
        user_settings_file(tmp_path).write_text(dot_env)
        user_settings_file(tmp_path).chmod(0o600)
    expected = _settings_say()
    assert _address_says(monkeypatch) == (expected, builds)


@pytest.mark.parametrize("bad", ["folder", "mode 0644"])
def test_a_settings_file_that_may_not_be_read_is_the_same_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, bad: str
) -> None:
    if bad == "folder":
        user_settings_file(tmp_path).mkdir()
    else:
        user_settings_file(tmp_path).write_text("COLABQ_KEY_PREFIX=team\n")
        user_settings_file(tmp_path).chmod(0o644)
    said = _settings_say()
    assert isinstance(said, str) and said.startswith(
        f"The settings file {user_settings_file(tmp_path)}"
    )
    assert _address_says(monkeypatch) == (said, False)


def test_the_ledger_defaults_are_the_settings_defaults() -> None:
    fields: Any = Settings.model_fields
    assert {name: fields[name].default for name in LEDGER_DEFAULTS} == LEDGER_DEFAULTS


LINES = [
    ("No job matched.", "80"),
    ("No job matched.", "15"),
    ("No job matched.", "14"),
    ("Page 3 is past the end: 12 matched, 1 page(s).", "30"),
    ("x" * 90, "80"),
    ("a\tb", "80"),
    ("ünï", "80"),
    ("Page 3 is past the end: 12 matched, 1 page(s).", "0"),
]


@pytest.mark.parametrize(("text", "columns"), LINES)
def test_a_plain_line_prints_as_rich_prints_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], text: str, columns: str
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.delenv("TERM", raising=False)
    Console().print(Text(text))
    by_rich = capsys.readouterr().out
    print_line(text)
    assert capsys.readouterr().out == by_rich


class _NoRich:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"rich was asked for {name}")


def test_a_line_that_fits_is_printed_without_rich(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(clictx, "out", _NoRich())
    print_line("No job matched.")
    assert capsys.readouterr().out == "No job matched.\n"
    with pytest.raises(AssertionError, match="rich was asked"):
        print_line("x" * 81)  # the other side: a line rich would wrap goes through rich


@pytest.mark.parametrize(
    ("env", "at_most"),
    [({"COLUMNS": "120"}, 120), ({"COLUMNS": "200", "TERM": "dumb"}, 80),
     ({"COLUMNS": "7"}, 7)],
)  # fmt: skip
def test_the_console_width_is_never_wider_than_riches(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], at_most: int
) -> None:
    monkeypatch.delenv("TERM", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert clictx.console_width() == at_most
    assert clictx.console_width() <= Console().width
