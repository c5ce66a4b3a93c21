"""Fault injection rules: which requests to fail, drop, slow down or refuse, and how many times.

A rule matches a request by method (regex, full match, case-insensitive) and path (regex searched
in the raw path, without the query string). Kinds:

- `status`: answer `status` (e.g. 500/502/503) instead of serving, for the next `count` matches;
- `close`: close the connection without any answer, for the next `count` matches;
- `delay`: sleep `delay_s` before serving (every match, or the next `count`);
- `down`: answer 503 to every match until the rule is removed.

`count=None` means "until cleared". Rules are checked in the order they were added; delays add
up, and the first failing rule (status/close/down) decides the answer. Admin requests are never
subject to faults (that is `server`'s call, not this table's).
"""

from __future__ import annotations

import itertools
import re
import threading
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any


class FaultKind(StrEnum):
    STATUS = "status"
    CLOSE = "close"
    DELAY = "delay"
    DOWN = "down"


@dataclass(frozen=True)
class FaultRule:
    id: int
    kind: FaultKind
    method: str = ".*"
    path: str = ".*"
    status: int = 503
    count: int | None = 1
    delay_s: float = 0.0

    def matches(self, method: str, path: str) -> bool:
        return bool(re.fullmatch(self.method, method, re.IGNORECASE) and re.search(self.path, path))

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": str(self.kind),
            "method": self.method,
            "path": self.path,
            "status": self.status,
            "count": self.count,
            "delay_s": self.delay_s,
        }


@dataclass(frozen=True)
class FaultDecision:
    """What to do to one request; `status is None and not close` means serve it normally."""

    delay_s: float = 0.0
    status: int | None = None
    close: bool = False
    rule_id: int | None = None

    @property
    def label(self) -> str | None:
        if self.close:
            return "close"
        if self.status is not None:
            return f"status:{self.status}"
        return f"delay:{self.delay_s}" if self.delay_s else None


def parse_rule(rule_id: int, data: dict[str, Any]) -> FaultRule:
    """A rule from its admin-API JSON; ValueError on nonsense."""
    kind = FaultKind(str(data.get("kind", "")))
    count = data.get("count", None if kind in (FaultKind.DOWN, FaultKind.DELAY) else 1)
    status = int(data.get("status", 503))
    if kind is FaultKind.DOWN:
        count, status = None, 503
    if count is not None and int(count) < 1:
        raise ValueError("count must be >= 1 or null")
    rule = FaultRule(
        id=rule_id,
        kind=kind,
        method=str(data.get("method") or ".*"),
        path=str(data.get("path") or ".*"),
        status=status,
        count=None if count is None else int(count),
        delay_s=float(data.get("delay_s", 0.0)),
    )
    try:
        re.compile(rule.method)
        re.compile(rule.path)
    except re.error as exc:
        raise ValueError(f"invalid regex: {exc}") from exc
    if not 100 <= rule.status <= 599:
        raise ValueError(f"invalid status {rule.status}")
    return rule


class FaultTable:
    def __init__(self) -> None:
        self._rules: list[FaultRule] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def add(self, data: dict[str, Any]) -> FaultRule:
        with self._lock:
            rule = parse_rule(next(self._ids), data)
            self._rules.append(rule)
            return rule

    def remove(self, rule_id: int) -> bool:
        with self._lock:
            before = len(self._rules)
            self._rules = [r for r in self._rules if r.id != rule_id]
            return len(self._rules) != before

    def clear(self) -> None:
        with self._lock:
            self._rules = []

    def rules(self) -> list[FaultRule]:
        with self._lock:
            return list(self._rules)

    def decide(self, method: str, path: str) -> FaultDecision:
        """Consume one use of every matching rule that applies and say what to do."""
        delay_s = 0.0
        with self._lock:
            kept: list[FaultRule] = []
            decision: FaultDecision | None = None
            for rule in self._rules:
                applies = rule.matches(method, path) and (
                    rule.kind is FaultKind.DELAY or decision is None
                )
                if not applies:
                    kept.append(rule)
                    continue
                if rule.kind is FaultKind.DELAY:
                    delay_s += rule.delay_s
                elif rule.kind is FaultKind.CLOSE:
                    decision = FaultDecision(close=True, rule_id=rule.id)
                else:
                    decision = FaultDecision(status=rule.status, rule_id=rule.id)
                if rule.count is None:
                    kept.append(rule)
                elif rule.count > 1:
                    kept.append(replace(rule, count=rule.count - 1))
            self._rules = kept
        base = decision or FaultDecision()
        return replace(base, delay_s=delay_s)
