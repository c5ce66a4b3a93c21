"""What the `colabq` commands share: the consoles, and lazy access to settings, Celery and Redis.

Heavy imports (celery, redis, pydantic-settings) happen inside these functions, so that
`colabq preflight` and `--help` start fast. Every command builds its settings here, once:
`load_settings()` where it needs them at once, a `LazySettings` where it may not need them.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

if TYPE_CHECKING:
    from worker.records.ledger import Ledger
    from worker.settings import Settings

out = Console()
err = Console(stderr=True)
JsonOpt = Annotated[bool, typer.Option("--json", help="Print data instead of a table.")]


# Where pydantic-settings reads from (worker/settings.py's model_config; a test keeps them equal).
ENV_PREFIX = "COLABQ_"
ENV_FILE = ".env"


def load_settings(**overrides: object) -> Settings:
    from worker.settings import load_settings as _load

    return _load(**overrides)


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
        """Whether the environment or the .env file may set `field` (a cheap look, without
        pydantic): False means the default applies, so the settings need not be built for it."""
        if self._settings is not None:
            return True
        name = f"{ENV_PREFIX}{field}".lower()  # pydantic-settings' names are case-insensitive
        if any(key.lower() == name for key in os.environ):
            return True
        try:
            return name in Path(ENV_FILE).read_text(errors="replace").lower()
        except FileNotFoundError:
            return False
        except OSError:
            return True  # an unreadable .env: building the settings says so in one line


def build_app(settings: Settings) -> Any:
    from worker.celery_app import build_app as _build

    return _build(settings)


def queue_for(gpu: object, prefix: str) -> str:
    from worker.spec import queue_for as _queue_for

    return _queue_for(str(gpu), prefix)


def _connect(settings: Settings) -> Ledger:
    from worker.deps import connect_ledger

    return connect_ledger(settings)
