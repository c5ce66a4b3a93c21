"""What the `colabq` commands share: the consoles, and lazy access to settings, Celery and Redis.

Heavy imports (celery, redis, pydantic) happen inside these functions, so that `colabq preflight`
and `--help` start fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

if TYPE_CHECKING:
    from worker.records.ledger import Ledger
    from worker.settings import Settings

out = Console()
err = Console(stderr=True)
JsonOpt = Annotated[bool, typer.Option("--json", help="Print data instead of a table.")]


def load_settings(**overrides: object) -> Settings:
    from worker.settings import load_settings as _load

    return _load(**overrides)


def build_app(settings: Settings) -> Any:
    from worker.celery_app import build_app as _build

    return _build(settings)


def queue_for(gpu: object, prefix: str) -> str:
    from worker.spec import queue_for as _queue_for

    return _queue_for(str(gpu), prefix)


def _connect(settings: Settings) -> Ledger:
    from worker.deps import connect_ledger

    return connect_ledger(settings)
