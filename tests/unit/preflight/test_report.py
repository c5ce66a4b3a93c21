"""The report: verdict aggregation, waivers, digest and JSON."""

from __future__ import annotations

import json

import pytest

from producer.preflight.report import (
    CHECK_NAMES,
    WAIVER_NAMES,
    CheckName,
    Finding,
    Report,
    UnknownCheck,
    Verdict,
    worst_verdict,
)


def _finding(check: CheckName, verdict: Verdict, saw: str = "saw") -> Finding:
    return Finding(check, verdict, saw, "next", ("detail",))


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        ((), Verdict.PASS),
        ((Verdict.PASS, Verdict.PASS), Verdict.PASS),
        ((Verdict.PASS, Verdict.WARN), Verdict.WARN),
        ((Verdict.WARN, Verdict.SKIP), Verdict.SKIP),  # unmeasured outranks a known warning
        ((Verdict.SKIP, Verdict.FAIL, Verdict.PASS), Verdict.FAIL),
    ],
)
def test_worst_verdict(verdicts: tuple[Verdict, ...], expected: Verdict) -> None:
    assert worst_verdict(verdicts) is expected


def test_check_names_are_the_waivable_names() -> None:
    assert CHECK_NAMES == (
        "config-diff", "run-name", "paths", "monitoring", "eta", "code", "environment"
    )  # fmt: skip
    assert WAIVER_NAMES[-1] == "dirty-tree"  # a part of `code`, waived by its own name
    assert WAIVER_NAMES[:-1] == CHECK_NAMES


@pytest.mark.parametrize(
    ("waive_with", "waived", "failed", "waived_failures"),
    [
        (("dirty-tree",), (), ("dirty-tree",), ()),
        (("dirty-tree",), ("code",), ("dirty-tree",), ()),  # the check's name does not waive it
        (("dirty-tree",), ("dirty-tree",), (), ("dirty-tree",)),
        (("dirty-tree", "code"), ("dirty-tree",), ("code",), ("dirty-tree",)),  # both needed
        (("dirty-tree", "code"), ("code", "dirty-tree"), (), ("dirty-tree", "code")),
    ],
)
def test_a_finding_waived_by_its_own_names(
    waive_with: tuple[str, ...],
    waived: tuple[str, ...],
    failed: tuple[str, ...],
    waived_failures: tuple[str, ...],
) -> None:
    finding = Finding(CheckName.CODE, Verdict.FAIL, "saw", "next", waive_with=waive_with)
    report = Report.build([finding], waived)
    assert report.failed_checks == failed and report.ok is (not failed)
    assert report.waived_failures == waived_failures
    assert json.loads(report.to_json())["findings"][0]["waive_with"] == list(waive_with)


@pytest.mark.parametrize(
    ("findings", "waived", "ok", "failed"),
    [
        ([_finding(CheckName.PATHS, Verdict.PASS)], (), True, ()),
        ([_finding(CheckName.PATHS, Verdict.SKIP)], (), True, ()),  # skip is not a failure …
        ([_finding(CheckName.PATHS, Verdict.FAIL)], (), False, ("paths",)),
        ([_finding(CheckName.PATHS, Verdict.FAIL)], ("paths",), True, ()),
        (
            [_finding(CheckName.PATHS, Verdict.FAIL), _finding(CheckName.ETA, Verdict.FAIL)],
            ("paths",),
            False,
            ("eta",),
        ),
    ],
)
def test_ok_considers_waivers(
    findings: list[Finding], waived: tuple[str, ...], ok: bool, failed: tuple[str, ...]
) -> None:
    report = Report.build(findings, waived)
    assert report.ok is ok
    assert report.failed_checks == failed


def test_skip_is_never_reported_as_pass() -> None:
    report = Report.build([_finding(CheckName.PATHS, Verdict.SKIP)])
    assert json.loads(report.to_json())["findings"][0]["verdict"] == "skip"


def test_unknown_waiver_is_refused() -> None:
    with pytest.raises(UnknownCheck, match="config_diff"):
        Report.build([], ["config_diff"])


def test_digest_is_stable_and_tracks_content() -> None:
    a = Report.build([_finding(CheckName.ETA, Verdict.PASS, "ends at 5")])
    b = Report.build([_finding(CheckName.ETA, Verdict.PASS, "ends at 5")])
    c = Report.build([_finding(CheckName.ETA, Verdict.PASS, "ends at 6")])
    d = Report.build([_finding(CheckName.ETA, Verdict.PASS, "ends at 5")], ["eta"])
    assert a.digest == b.digest
    assert len({a.digest, c.digest, d.digest}) == 3
    assert len(a.digest) == 64


def test_to_json_is_canonical_and_complete() -> None:
    report = Report.build([_finding(CheckName.ETA, Verdict.FAIL)], ["eta"])
    payload = json.loads(report.to_json())
    assert payload["digest"] == report.digest
    assert payload["ok"] is True
    assert payload["waived"] == ["eta"]
    assert payload["findings"][0] == {
        "check": "eta",
        "verdict": "fail",
        "saw": "saw",
        "next_action": "next",
        "details": ["detail"],
    }
    assert report.to_json() == json.dumps(payload, sort_keys=True, separators=(",", ":"))
    assert report.finding("eta").verdict is Verdict.FAIL
