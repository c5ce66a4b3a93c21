"""Optimistic transactions over Redis (WATCH, MULTI, EXEC), retried whenever a watched key
changed under them. Used by the ledger's writers and by the ownership functions; what each
transaction checks and writes is theirs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import redis

T = TypeVar("T")


def watched(client: Any, fn: Callable[[Any], T], *keys: str) -> T:
    """Run `fn(pipe)` with `keys` watched: it reads, then calls `pipe.multi()` and queues its
    writes (or returns without, writing nothing). A conflict runs it again from the start."""
    while True:
        with client.pipeline() as pipe:
            try:
                pipe.watch(*keys)
                result = fn(pipe)
                if pipe.explicit_transaction:
                    pipe.execute()
                return result
            except redis.WatchError:
                continue
