"""The janitor's and the notifier's counters in Redis, written where they act (services only).

A janitor pass adds its actions, by account, in the round trip that ends the pass
(`worker.janitor.run`): orphan sessions stopped, jobs adopted, settled or sent again, ghost
tracker runs closed, actions that failed. The notifier adds each notification it gave up on, by
target and the state it told of. `read_counts` decodes either hash, skipping what does not parse.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from worker.metrics import labels
from worker.records.keys import Keys

# A janitor row's `did`, by how it starts, and the action it counts as.
JANITOR_ACTIONS = (
    ("did: stop orphan", "orphan_stopped"),
    ("did: adopt", "adopted"),
    ("did: settle", "settled"),
    ("did: send again", "resent"),
    ("did: clear dead claim", "resent"),
    ("failed:", "failed"),
)
GHOST = "ghost_run_closed"  # a tracker run row that did something
ACTIONS = tuple(dict.fromkeys([*(a for _, a in JANITOR_ACTIONS), GHOST]))


class Row(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def did(self) -> str: ...


def janitor_action(row: Row) -> str | None:
    """What a janitor report's row counts as (None: it did nothing worth counting)."""
    if row.kind == "tracker run":
        return GHOST if row.did.startswith("did:") else None
    for start, action in JANITOR_ACTIONS:
        if row.did.startswith(start):
            return action
    return None


def count_janitor(pipe: Any, keys: Keys, account: str, rows: Iterable[Row]) -> None:
    """Queue a pass's actions on `pipe` (one HINCRBY per kind of action taken)."""
    taken: dict[str, int] = {}
    for row in rows:
        if (action := janitor_action(row)) is not None:
            taken[action] = taken.get(action, 0) + 1
    for action, n in taken.items():
        pipe.hincrby(keys.metrics_janitor(), f"{labels.clean(account)}{labels.SEP}{action}", n)


def count_notify_failure(r: Any, keys: Keys, target: str, state: str) -> None:
    """One notification given up on (one round trip)."""
    r.hincrby(keys.metrics_notify(), f"{labels.clean(target)}{labels.SEP}{labels.clean(state)}", 1)


def read_counts(
    raw: Mapping[bytes, bytes], seconds: Iterable[str]
) -> tuple[dict[tuple[str, str], int], int]:
    """A counters hash (`HGETALL`) by its two labels (the second one of `seconds`, else
    `other`), and how many fields did not parse."""
    out: dict[tuple[str, str], int] = {}
    skipped = 0
    firsts, known = labels.Capped(), frozenset(seconds)
    for key, value in raw.items():
        parts = labels.split(key, 2)
        try:
            n = int(value)
        except ValueError:
            n = -1
        if parts is None or n < 0:
            skipped += 1
            continue
        second = parts[1] if parts[1] in known else labels.OTHER
        k = (firsts(labels.clean(parts[0])), second)
        out[k] = out.get(k, 0) + n
    return out, skipped
