"""A run's position from what its lines said (`parse`): how much is done of how much, in what unit.

The sources, strongest first:
1. `colabq-progress step=N total=M`: the job said so.
2. Keras: the last `Epoch N/M` line, and the fraction of the step bar printed after it.
3. Lightning: the outermost bar whose description is `Epoch N` or `Epoch N/M`. Its epoch is
   counted from 0 when the first such bar seen says `Epoch 0` (Lightning's own numbering, where
   M is the last epoch's number), else from 1 (a loop's `Epoch 1/10`). Without M, the epochs
   are the job's own `epochs` (`--epochs`, or the config's), when it has them.
4. A plain tqdm bar, the outermost (the one with the largest total when several take turns, as a
   training bar and an evaluation bar do), refined by a nested bar's fraction printed after the
   outer one last moved. A bar that starts again with the same total (once per epoch: its count
   went back, or its line ended full) counts rounds: with the job's `epochs` that is the run's
   fraction; without, the rate alone is known.
5. Hugging Face Trainer's `'epoch': 1.25`, of the job's `epochs`.

The few facts a later attach client needs to go on (the numbering, the rounds, Keras' epoch) are
`state()`, restored from the stored reading (`record`). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from worker.progress.parse import Bar, Explicit, Found, Header, TrainerLog, parse_line

MAX_TOTALS = 4  # the bars (by total) kept: a training bar and an evaluation bar take turns
SOURCES = ("colabq-progress", "keras", "lightning", "tqdm", "trainer")


@dataclass(frozen=True, slots=True)
class Position:
    done: float  # in `unit`, since the run's start
    total: float | None  # None: the run's length is not known (a rate, no fraction)
    unit: str  # "epoch", "step", or the bar's own ("it", "img", ...)
    source: str  # one of SOURCES

    @property
    def fraction(self) -> float | None:
        if not self.total:
            return None
        return min(max(self.done / self.total, 0.0), 1.0)


@dataclass
class _Seen:
    """The latest update of the outermost bar with one total."""

    bar: Bar
    seq: int  # when it was last printed
    moved: int  # when its count last changed
    rounds: int = 0  # how many times it started again
    closed: bool = False  # its line ended with it full: the next one is a new round


class Tracker:
    """Fed lines (or found items) in the order printed; `position()` says where the run is."""

    def __init__(self, epochs: float | None = None, state: Mapping[str, Any] | None = None):
        self.epochs = epochs if epochs and epochs > 0 else None
        self.seq = 0
        self.explicit: Explicit | None = None
        self.header: tuple[int, Header] | None = None
        self.bars: dict[float, _Seen] = {}
        self.latest: _Seen | None = None  # the outermost bar printed last
        self.inner: tuple[int, Bar] | None = None
        self.trainer: TrainerLog | None = None
        self.base: int | None = None  # Lightning-style epochs counted from 0 or from 1
        self.changed = False
        if state:
            self._restore(state)

    def feed_line(self, line: str, *, ended: bool = True) -> None:
        """`ended`: the line is complete (False: a bar's update of a line still being written)."""
        found = parse_line(line)
        for i, item in enumerate(found):
            self.feed(item, closes=ended and i == len(found) - 1)

    def feed(self, found: Found, *, closes: bool = False) -> None:
        """`closes`: `found` ended its line (a full bar there is a bar that finished)."""
        self.seq += 1
        self.changed = True
        if isinstance(found, Explicit):
            self.explicit = found
        elif isinstance(found, Header):
            self.header = (self.seq, found)
        elif isinstance(found, TrainerLog):
            self.trainer = found
        elif found.nested:
            self.inner = (self.seq, found)
        else:
            self._outer(found, closes)

    def _outer(self, bar: Bar, closes: bool) -> None:
        if bar.epoch is not None and self.base is None:
            self.base = 0 if bar.epoch == 0 else 1
        seen = self.bars.get(bar.total)
        if seen is None:
            if len(self.bars) >= MAX_TOTALS:
                del self.bars[min(self.bars)]
            seen = self.bars[bar.total] = _Seen(bar, self.seq, self.seq)
        else:
            plain = bar.epoch is None and not bar.keras
            if plain and (seen.closed or bar.n < seen.bar.n):
                seen.rounds += 1  # the same bar again: a loop's next epoch
            if bar.n != seen.bar.n or bar.epoch != seen.bar.epoch or seen.closed:
                seen.moved = self.seq
            seen.bar, seen.seq = bar, self.seq
        seen.closed = closes and bar.n >= bar.total
        self.latest = seen

    def position(self) -> Position | None:
        if self.explicit is not None:
            return Position(self.explicit.step, self.explicit.total, "step", "colabq-progress")
        if self.header is not None:
            seq, h = self.header
            step = self.latest
            frac = step.bar.n / step.bar.total if step is not None and step.seq > seq else 0.0
            return Position(h.epoch - 1 + frac, float(h.epochs), "epoch", "keras")
        if self.latest is not None and self.latest.bar.epoch is not None:
            return self._lightning(self.latest.bar)
        if self.bars:
            return self._plain(self.bars[max(self.bars)])
        if self.inner is not None:
            bar = self.inner[1]
            return Position(bar.n, bar.total, bar.unit, "tqdm")
        if self.trainer is not None:
            return Position(self.trainer.epoch, self.epochs, "epoch", "trainer")
        return None

    def _lightning(self, bar: Bar) -> Position:
        base = self.base or 0
        epochs: float | None = self.epochs
        if bar.epochs is not None:
            epochs = float(bar.epochs + 1 - base)
        done = max(bar.epoch or 0, base) - base + bar.n / bar.total
        return Position(done, epochs, "epoch", "lightning")

    def _plain(self, seen: _Seen) -> Position:
        bar = seen.bar
        if seen.rounds:
            total = self.epochs * bar.total if self.epochs else None
            return Position(seen.rounds * bar.total + bar.n, total, bar.unit, "tqdm")
        done = bar.n
        if self.inner is not None and self.inner[0] > seen.moved and bar.n < bar.total:
            inner = self.inner[1]
            done += inner.n / inner.total
        return Position(done, bar.total, bar.unit, "tqdm")

    # --- what a later attach client goes on from ---------------------------------------------

    def state(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.base is not None:
            out["base"] = self.base
        if self.header is not None:
            out["header"] = [self.header[1].epoch, self.header[1].epochs]
        if self.bars:
            seen = self.bars[max(self.bars)]
            if seen.rounds or seen.closed:  # a later client counts from a bar at 0
                out["rounds"] = [seen.bar.total, seen.rounds + seen.closed]
        return out

    def _restore(self, state: Mapping[str, Any]) -> None:
        """Whatever of `state` is well-formed (it was read back from Redis)."""
        base = state.get("base")
        if base in (0, 1) and not isinstance(base, bool):
            self.base = int(base)
        header = state.get("header")
        if _ints(header, 2):
            epoch, epochs = header
            if 1 <= epoch <= epochs:
                self.header = (0, Header(epoch, epochs))
        rounds = state.get("rounds")
        if _numbers(rounds, 2):
            total, count = float(rounds[0]), int(rounds[1])
            if total > 0 and 0 < count < 10**9:
                self.bars[total] = _Seen(Bar(0.0, total), 0, 0, count)


def _ints(value: object, n: int) -> TypeGuard[list[int]]:
    return (
        isinstance(value, list)
        and len(value) == n
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    )


def _numbers(value: object, n: int) -> TypeGuard[list[float]]:
    return (
        isinstance(value, list)
        and len(value) == n
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
        and all(v == v and abs(v) < 1e18 for v in value)
    )
