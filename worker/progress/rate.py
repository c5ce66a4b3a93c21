"""The rate a run goes at, measured from its readings, and the end it projects. Pure.

A reading is (when it was seen, how much was done). The rate is measured over the last
`WINDOW_S` (or, when progress comes more slowly, since the newest reading before that window):
it follows a run whose speed changes, and a steady run's end comes out within the time between
two readings. Readings are kept about one a second as exact pairs, and readings that arrive
within `BURST_S` of each other count as one (the newest): a backlog forwarded at once after an
attach client starts again is one reading, not a burst of speed. The first reading is kept for
the mean rate over the whole segment (the final report's).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

WINDOW_S = 300.0
SAMPLE_EVERY_S = 1.0
BURST_S = 0.25
MIN_SPAN_S = 2.0  # a rate needs readings at least this far apart


@dataclass(frozen=True, slots=True)
class Sample:
    at: float  # epoch s
    done: float


@dataclass(frozen=True, slots=True)
class Rate:
    per_s: float  # units of progress a second (0: no progress over the window)
    span_s: float  # the seconds it was measured over


class Estimator:
    """Readings in, the current rate out; `first` and `last` bound the whole segment."""

    def __init__(self, first: Sample | None = None, last: Sample | None = None) -> None:
        self.first = first
        self.last = last
        self._samples: deque[Sample] = deque([last] if last is not None else [])
        self._created = last.at if last is not None else float("-inf")

    def add(self, at: float, done: float) -> bool:
        """Take a reading; False when it is left out: a count lower than the last one but not
        below the first (an attach client catching up sees an older view for a moment)."""
        if self.last is not None:
            at = max(at, self.last.at)  # another host's clock a little behind: no time back
            if done < self.last.done:
                assert self.first is not None
                if done > self.first.done:
                    return False
                self.reset()  # the count went back past its start: the run started over
        reading = Sample(at, done)
        if self.first is None:
            self.first = reading
        if self._samples and at - self._created < BURST_S:
            self._samples[-1] = reading
        elif not self._samples or at - self._samples[-1].at >= SAMPLE_EVERY_S:
            self._samples.append(reading)
            self._created = at
        self.last = reading
        while len(self._samples) > 2 and self._samples[1].at <= at - WINDOW_S:
            self._samples.popleft()
        return True

    def reset(self) -> None:
        self.first = self.last = None
        self._samples.clear()
        self._created = float("-inf")

    def rate(self) -> Rate | None:
        """None until readings `MIN_SPAN_S` apart were seen."""
        if self.last is None or not self._samples:
            return None
        ref = self._samples[0]
        span = self.last.at - ref.at
        if span < MIN_SPAN_S:
            return None
        return Rate(max(self.last.done - ref.done, 0.0) / span, span)

    def mean(self) -> Rate | None:
        """The rate over the whole segment so far."""
        if self.first is None or self.last is None:
            return None
        span = self.last.at - self.first.at
        if span < MIN_SPAN_S:
            return None
        return Rate(max(self.last.done - self.first.done, 0.0) / span, span)


def eta_at(last: Sample, total: float | None, per_s: float | None) -> float | None:
    """When the run reaches `total` at `per_s` from `last`; None without both."""
    if total is None or not per_s or per_s <= 0:
        return None
    return last.at + max(total - last.done, 0.0) / per_s
