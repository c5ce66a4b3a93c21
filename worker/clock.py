"""Time as a side effect: the `Clock` protocol, the system clock, and a fake for tests.

Pure decisions take `now` as a parameter; loops take a clock, so tests never really sleep.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def time(self) -> float:
        """Wall-clock seconds since the epoch (for records people read)."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (for timers)."""

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(seconds, 0.0))


class FakeClock:
    """Sleeping advances time instantly; `advance()` moves it from a test."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def time(self) -> float:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        return self.time()

    def sleep(self, seconds: float) -> None:
        self.advance(max(seconds, 0.0))

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds
