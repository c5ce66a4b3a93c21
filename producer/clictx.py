"""What the `colabq` commands share: the consoles, and lazy access to settings, Celery and Redis.

Heavy imports (celery, redis, pydantic-settings, rich) happen inside these functions, so that
`colabq status`, `colabq preflight` and `--help` start fast. Every command builds its settings
here, once: `load_settings()` where it needs them at once, a `LazySettings` where it may not
need them, `ledger_address()` where it only reads the ledger.

The consoles `out` and `err` are rich Consoles built on first use (importing rich costs about
0.04 s of start-up), and again when the stream they write to was replaced (a test runner's), as
a Console built when the command started would be. `print_line` prints one plain line as
`out.print(Text(line))` does, without rich when the line fits the width rich would use.
"""

from __future__ import annotations

import builtins
import os
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from worker.errors import ConfigError
from worker.settingsfiles import ENV_FILE_VAR, settings_files
from worker.utils import key_name_problem, redis_master_name_problem, redis_url_problem

if TYPE_CHECKING:
    from rich.console import Console

    from worker.records.ledger import Ledger
    from worker.records.sentinelurl import SentinelLogin
    from worker.settings import Settings

JsonOpt = Annotated[bool, typer.Option("--json", help="Print data instead of a table.")]
JobArg = Annotated[str, typer.Argument(help="Job id (a unique prefix is enough).")]


# Where pydantic-settings reads from (worker/settings.py's model_config; a test keeps them equal).
# The settings files are worker.settingsfiles' (standard library only).
ENV_PREFIX = "COLABQ_"
# The settings a command that only reads the ledger needs, with worker/settings.py's defaults
# (a test keeps them equal).
LEDGER_DEFAULTS: dict[str, str | None] = {
    "redis_url": "redis://127.0.0.1:6379/0", "redis_master_name": None,
    "redis_sentinel_username": None, "redis_sentinel_password": None, "key_prefix": "colabq",
}  # fmt: skip


class _LazyConsole:
    """A rich Console (`stderr` or not) built on first use; see the module's docstring."""

    def __init__(self, *, stderr: bool) -> None:
        self._stderr = stderr
        self._built: tuple[object, Any] | None = None

    def _console(self) -> Any:
        stream: object = sys.stderr if self._stderr else sys.stdout
        stream = getattr(stream, "rich_proxied_file", stream)  # rich's own redirect (Live)
        if self._built is None or self._built[0] is not stream:
            from rich.console import Console

            self._built = (stream, Console(stderr=self._stderr))
        return self._built[1]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._console(), name)

    # Special methods are looked up on the type, not through __getattr__ (rich's Live enters
    # its console to buffer a frame).
    def __enter__(self) -> Any:
        return self._console().__enter__()

    def __exit__(self, *exc: object) -> None:
        self._console().__exit__(*exc)


if TYPE_CHECKING:
    out: Console
    err: Console
else:
    out = _LazyConsole(stderr=False)
    err = _LazyConsole(stderr=True)


def console_width() -> int:
    """At most the width a rich Console on stdout renders to (COLUMNS, else the first of
    stdin, stdout, stderr that is a terminal, else 80; 80 on a dumb terminal); 0 where rich
    decides otherwise (Windows, a notebook)."""
    if sys.platform == "win32" or hasattr(builtins, "get_ipython"):
        return 0
    columns = os.environ.get("COLUMNS", "")
    widths = [80] if os.environ.get("TERM", "").lower() in ("dumb", "unknown") else []
    if columns.isdigit():
        widths.append(int(columns))
    else:
        widths.append(_terminal_width())
    return min(widths)


def _terminal_width() -> int:
    for fd in (0, 1, 2):
        try:
            return os.get_terminal_size(fd).columns or 80
        except (AttributeError, ValueError, OSError):
            continue
    return 80


def print_line(text: str) -> None:
    """Print `text` as `out.print(Text(text))` does: plainly, without importing rich, when it
    is one printable ASCII line that fits the console's width; through rich otherwise."""
    if text.isascii() and text.isprintable() and 0 < len(text) <= console_width():
        print(text, flush=True)
        return
    from rich.text import Text

    out.print(Text(text))


def load_settings(**overrides: object) -> Settings:
    from worker.settings import load_settings as _load

    return _load(**overrides)


@dataclass(frozen=True)
class LedgerAddress:
    """Where the ledger is: all that a command that only reads it needs of the settings."""

    redis_url: str
    key_prefix: str
    redis_master_name: str | None = None  # with a sentinel:// redis_url
    sentinel_login: SentinelLogin | None = None  # idem: the sentinels' own

    @classmethod
    def of(cls, settings: Settings) -> LedgerAddress:
        return cls(
            settings.redis_url, settings.key_prefix, settings.redis_master_name,
            settings.sentinel_login(),
        )  # fmt: skip


def ledger_address() -> LedgerAddress:
    """The `redis_url`, `key_prefix` and Sentinel settings, validated as the settings object
    validates them (the same one-line errors). Read without pydantic-settings (about 0.1 s of
    start-up) when the environment sets no other setting and no settings file names any;
    otherwise from the settings object, so that an invalid setting fails this command as it
    fails every other."""
    found = _ledger_settings_alone()
    if found is None:
        return LedgerAddress.of(load_settings())
    from worker.records.sentinelurl import (
        SentinelLogin,
        sentinel_password_problem,
        sentinel_username_problem,
    )

    url = found.get("redis_url", str(LEDGER_DEFAULTS["redis_url"]))
    master = found.get("redis_master_name", "").strip() or None  # empty is unset
    user = found.get("redis_sentinel_username", "").strip() or None
    password = found.get("redis_sentinel_password") or None
    prefix = found.get("key_prefix", str(LEDGER_DEFAULTS["key_prefix"]))
    # In the settings' field order: the first invalid field is the one reported.
    url_problem = redis_url_problem(url)
    for name, problem in (
        ("redis_url", url_problem),
        ("redis_master_name", None if url_problem else redis_master_name_problem(url, master)),
        ("redis_sentinel_username", sentinel_username_problem(user)),
        ("redis_sentinel_password", sentinel_password_problem(user, password)),
        ("key_prefix", key_name_problem(prefix, empty_ok=False)),
    ):
        if problem:
            raise ConfigError.invalid(f"{ENV_PREFIX}{name.upper()}", problem)
    return LedgerAddress(url, prefix, master, SentinelLogin(user, password))


def _ledger_settings_alone() -> dict[str, str] | None:
    """The ledger settings the environment sets, when it sets no other setting (in any case,
    once each) and no settings file may set one; else None. A settings file that may not be
    read is refused here as the settings object refuses it."""
    found: dict[str, str] = {}
    prefix = ENV_PREFIX.lower()  # pydantic-settings' names are case-insensitive
    for key, value in os.environ.items():
        name = key.lower()
        if not name.startswith(prefix) or name == ENV_FILE_VAR.lower():
            continue
        field = name[len(prefix) :]
        if field not in LEDGER_DEFAULTS or field in found:
            return None
        found[field] = value
    return None if _files_may_name(prefix) else found


def _files_may_name(text: str) -> bool:
    """Whether a settings file may hold `text` (lower case): a cheap look, without pydantic."""
    for path in settings_files():
        try:
            if text in path.read_text(errors="replace").lower():
                return True
        except OSError:
            return True  # unreadable after all: the settings object says so in one line
    return False


class LazySettings:
    """One command's settings object, built on first call (importing pydantic-settings costs
    about 0.1 s of start-up, which `colabq preflight` pays only when it needs a setting)."""

    def __init__(self, loaded: Settings | None = None) -> None:
        self._settings = loaded
        self._lock = threading.Lock()

    def __call__(self) -> Settings:
        with self._lock:
            if self._settings is None:
                self._settings = load_settings()
            return self._settings

    def may_set(self, field: str) -> bool:
        """Whether the environment or a settings file may set `field` (a cheap look, without
        pydantic): False means the default applies, so the settings need not be built for it."""
        if self._settings is not None:
            return True
        name = f"{ENV_PREFIX}{field}".lower()  # pydantic-settings' names are case-insensitive
        if any(key.lower() == name for key in os.environ):
            return True
        try:
            return _files_may_name(name)
        except ConfigError:
            return True  # a settings file that may not be read: building the settings says so


def build_app(settings: Settings) -> Any:
    from worker.celery_app import build_app as _build

    return _build(settings)


def queue_for(gpu: object, prefix: str) -> str:
    from worker.spec import queue_for as _queue_for

    return _queue_for(str(gpu), prefix)


def cannot_listen(exc: OSError, what: str, address: str, port: int) -> Exception:
    """The one line for a server that cannot listen (`exc` itself for any other OSError)."""
    import errno

    if exc.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
        return exc
    from worker.errors import UserInputError

    return UserInputError(
        f"{what} cannot listen on {address or '*'}:{port} ({exc.strerror}): choose another "
        "--port or --address."
    )


def _connect(settings: Settings) -> Ledger:
    from worker.deps import connect_ledger

    return connect_ledger(settings)
