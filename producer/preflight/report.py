"""Pre-flight results: one `Finding` per check and the `Report` that gates a submission.

Owns the verdict vocabulary, the check names users waive by, and the report digest (recorded on
the job). The checks themselves live in their own modules; `render.py` draws a report.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from worker.errors import UserInputError

REPORT_VERSION = 1


class Verdict(StrEnum):
    PASS = "pass"  # noqa: S105 (a verdict, not a password)
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"  # could not be measured: never counted as a pass


class CheckName(StrEnum):
    CONFIG_DIFF = "config-diff"
    RUN_NAME = "run-name"
    PATHS = "paths"
    MONITORING = "monitoring"
    ETA = "eta"
    CODE = "code"
    ENVIRONMENT = "environment"


CHECK_NAMES: tuple[str, ...] = tuple(c.value for c in CheckName)
# A failure of part of a check that is waived by its own name, not the check's: shipping a
# commit from a dirty tree is a `code` failure waived only by `--waive dirty-tree`.
DIRTY_TREE = "dirty-tree"
WAIVER_NAMES: tuple[str, ...] = (*CHECK_NAMES, DIRTY_TREE)

# Worst first. SKIP outranks WARN: an unmeasured item might be a failure, a warning is known.
_SEVERITY = {Verdict.FAIL: 3, Verdict.SKIP: 2, Verdict.WARN: 1, Verdict.PASS: 0}


def worst_verdict(verdicts: Iterable[Verdict]) -> Verdict:
    """The most severe verdict of several; PASS when there are none."""
    return max(verdicts, key=_SEVERITY.__getitem__, default=Verdict.PASS)


class UnknownCheck(UserInputError):
    """A `--waive NAME` that names no check."""

    def __init__(self, name: str) -> None:
        known = ", ".join(WAIVER_NAMES)
        super().__init__(f"--waive {name!r}: no pre-flight check has that name (known: {known}).")
        self.name = name


def validate_waivers(names: Iterable[str]) -> frozenset[str]:
    waived = frozenset(names)
    for name in sorted(waived):
        if name not in WAIVER_NAMES:
            raise UnknownCheck(name)
    return waived


@dataclass(frozen=True)
class Finding:
    """What one check saw, its verdict, and what the user should do next. A failure is waived
    by the check's name, or, when `waive_with` is given, by every name in it."""

    check: CheckName
    verdict: Verdict
    saw: str
    next_action: str
    details: tuple[str, ...] = ()
    waive_with: tuple[str, ...] = ()

    @property
    def waivers(self) -> tuple[str, ...]:
        """The names that waive this finding's failure, all of them needed."""
        return self.waive_with or (self.check.value,)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "check": self.check.value,
            "verdict": self.verdict.value,
            "saw": self.saw,
            "next_action": self.next_action,
            "details": list(self.details),
        }
        if self.waive_with:
            data["waive_with"] = list(self.waive_with)
        return data


def _canonical(payload: Any) -> str:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Report:
    """All findings of one pre-flight run; build it with `Report.build` so the digest matches."""

    findings: tuple[Finding, ...]
    digest: str
    waived: frozenset[str] = frozenset()

    @classmethod
    def build(cls, findings: Iterable[Finding], waived: Iterable[str] = ()) -> Report:
        found = tuple(findings)
        waivers = validate_waivers(waived)
        return cls(findings=found, digest=_digest(found, waivers), waived=waivers)

    @property
    def failed_checks(self) -> tuple[str, ...]:
        """The names a failure blocks the submission by (checks, or `dirty-tree`): not waived."""
        names = (n for f in self.findings if f.verdict is Verdict.FAIL for n in f.waivers)
        return tuple(dict.fromkeys(n for n in names if n not in self.waived))

    @property
    def blocking(self) -> tuple[Finding, ...]:
        """The failed findings not (wholly) waived."""
        return tuple(
            f for f in self.findings if f.verdict is Verdict.FAIL and not self.is_waived(f)
        )

    def is_waived(self, finding: Finding) -> bool:
        return all(n in self.waived for n in finding.waivers)

    @property
    def waived_failures(self) -> tuple[str, ...]:
        names = (n for f in self.findings if f.verdict is Verdict.FAIL for n in f.waivers)
        return tuple(dict.fromkeys(n for n in names if n in self.waived))

    @property
    def ok(self) -> bool:
        return not self.failed_checks

    def finding(self, check: CheckName | str) -> Finding:
        for f in self.findings:
            if f.check.value == str(check):
                return f
        raise KeyError(str(check))

    def to_json(self) -> str:
        payload = _payload(self.findings, self.waived)
        payload["digest"] = self.digest
        payload["ok"] = self.ok
        return _canonical(payload)


def _payload(findings: tuple[Finding, ...], waived: frozenset[str]) -> dict[str, Any]:
    return {
        "version": REPORT_VERSION,
        "findings": [f.to_dict() for f in findings],
        "waived": sorted(waived),
    }


def _digest(findings: tuple[Finding, ...], waived: frozenset[str]) -> str:
    return hashlib.sha256(_canonical(_payload(findings, waived)).encode()).hexdigest()
