"""The attach client's side of progress: reading it from the console as the lines pass, and
handing the reading to the batch that writes those lines (`forward.FORWARD_SCRIPT`'s last
argument), at most every `WRITE_EVERY_S`: no Redis round trip of its own while lines flow.

`ProgressFeed` (the reader thread) looks at a chunk of framed console items at once: a substring
search for each format's marker over the chunk's text (C speed), so that a chatty job's lines
cost little unless one looks like progress; only the lines holding a marker are parsed. The
attach cell frames a bar's latest `\\r` updates, before its line ends, as an item of kind `p` (it
takes no bytes of the console and never reaches the log stream): a bar is seen as it moves, not
only when it ends. `Outbox` (the main thread) decides when a reading goes with a batch, or alone
when no line came for a while. Light: the standard library and this package only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from worker.progress import record
from worker.progress.rate import Estimator, Sample
from worker.progress.record import Reading
from worker.progress.track import Position, Tracker

WRITE_EVERY_S = 3.0
# What each format's lines hold: a bar's `\r` before each update (tqdm, Lightning, Keras while
# its step bar moves), `Epoch`/`'epoch'` (Keras, Trainer), Keras' `ms/step` once an epoch's bar
# is done, the job's own line. A line without any says no progress (`parse`) and is not looked
# at; a one-character needle is searched at memchr speed, and these few cost a fraction of what
# framing the chunk does.
MARKERS = ("\r", "poch", "/step", "colabq-progress")
Row = tuple[str, str, str, str]  # (start, end, kind, text) as the attach client parses them


class ProgressFeed:
    """Fed the attach client's chunks in order; `take()` is the newest reading, once."""

    def __init__(
        self,
        nonce: str,
        epochs: float | None = None,
        seed: Reading | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.head = f"@{nonce}"
        self.clock = clock
        self.tracker = Tracker(epochs, seed.state if seed is not None else None)
        self.estimator = Estimator()
        self.reading: Reading | None = None
        self._position: Position | None = None
        if seed is not None:
            self.estimator = Estimator(Sample(seed.first_at, seed.first_done),
                                       Sample(seed.at, seed.done))  # fmt: skip
            self.reading = seed
            self._position = Position(seed.done, seed.total, seed.unit, seed.source)
        self._fresh = False

    def see(self, text: str, rows: list[Row]) -> list[Row]:
        """Read progress from `text` (a chunk of framed lines) and return `rows` (its items)
        without the bar updates (kind `p`), which never reach the log stream."""
        found = False
        for start, end in marked_lines(text):
            parts = text[start:end].split(":", 4)
            if len(parts) == 5 and parts[0] == self.head and parts[3] in ("l", "p"):
                self.tracker.feed_line(parts[4], ended=parts[3] == "l")
                found = True
        if found and self.tracker.changed:
            self.tracker.changed = False
            self._measure(self.clock())
        if "\r" in text:  # a `p` item holds a bar's `\r`
            rows = [r for r in rows if r[2] != "p"]
        return rows

    def _measure(self, now: float) -> None:
        position = self.tracker.position()
        if position is None:
            return
        before = self._position
        if before is not None and (before.unit, before.source, before.total) != (
            position.unit, position.source, position.total,
        ):  # fmt: skip
            self.estimator.reset()  # another measure of the run: its own rate
        self._position = position
        if not self.estimator.add(now, position.done):
            return
        est, rate = self.estimator, self.estimator.rate()
        assert est.first is not None and est.last is not None
        self.reading = Reading(
            at=est.last.at, done=est.last.done, total=position.total, unit=position.unit,
            source=position.source, rate_per_s=rate.per_s if rate else None,
            span_s=rate.span_s if rate else 0.0, first_at=est.first.at,
            first_done=est.first.done, state=self.tracker.state(),
        )  # fmt: skip
        self._fresh = True

    def take(self) -> str:
        """The newest reading as stored, if there is one not taken yet; else ""."""
        if not self._fresh or self.reading is None:
            return ""
        self._fresh = False
        return record.encode(self.reading)


def marked_lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of each line of `text` that holds a marker, in order."""
    lines: set[tuple[int, int]] = set()
    for mark in MARKERS:
        at = text.find(mark)
        while at >= 0:
            start = text.rfind("\n", 0, at) + 1
            end = text.find("\n", at)
            end = len(text) if end < 0 else end
            lines.add((start, end))
            at = text.find(mark, end)
    return sorted(lines)


class Outbox:
    """When a reading goes to Redis: with the next batch once `every_s` passed since the last
    one went, alone when it waited that long with no batch, and always with the last batch."""

    def __init__(self, every_s: float = WRITE_EVERY_S, clock: Callable[[], float] = time.monotonic):
        self.every_s, self.clock = every_s, clock
        self.pending = ""
        self.sent_at = float("-inf")

    def offer(self, encoded: str) -> None:
        if encoded:
            self.pending = encoded

    def take(self, *, last: bool = False) -> str:
        """The reading to write with a batch now, or ""."""
        if not self.pending or (not last and self.clock() - self.sent_at < self.every_s):
            return ""
        out, self.pending, self.sent_at = self.pending, "", self.clock()
        return out

    def wait_s(self) -> float | None:
        """How long until a pending reading should go alone; None: nothing pending."""
        if not self.pending:
            return None
        return max(self.sent_at + self.every_s - self.clock(), 0.0)


def seed_of(r: Any, watch_key: str) -> Reading | None:
    """The reading the job's previous attach client stored (one HGET, when a client starts)."""
    return record.decode(r.hget(watch_key, record.FIELD))
