"""The `config-diff` check: find the reference, diff the intended config against it, judge.

Owns turning a `ConfigDiff` (or the reason there is none) into a `Finding`: FAIL for an
unexplained risky change or a missing reference, WARN for other unexplained changes, PASS
otherwise. Discovery, parsing and diffing are in their own modules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path

from producer.preflight.config_diff import ConfigDiff, DiffIssue, KeyDifference, diff_configs
from producer.preflight.configs import ConfigParseError, LoadedConfig, load_config
from producer.preflight.discovery import (
    MAX_AGE_DAYS,
    ReferenceChoice,
    choose_reference,
    find_config_candidates,
)
from producer.preflight.report import CheckName, Finding, Verdict
from producer.preflight.risky_keys import WHY_RISKY

_HOW_TO_EXPLAIN = "--explain KEY=REASON or a `# why: …` comment on the key's line"


def _fail(saw: str, action: str, details: tuple[str, ...] = ()) -> Finding:
    return Finding(CheckName.CONFIG_DIFF, Verdict.FAIL, saw, action, details)


def check_config_diff(
    intended: LoadedConfig | ConfigParseError | OSError,
    *,
    repo: Path,
    reference: Path | None,
    explain: Mapping[str, str],
    now: datetime,
    max_age_days: float = MAX_AGE_DAYS,
    on_reference: Callable[[Path], None] | None = None,
) -> Finding:
    """Judge the intended config (or why it could not be read) against its reference;
    `on_reference` is told which file that reference is (the ETA measures its earlier runs)."""
    if isinstance(intended, ConfigParseError):
        return _fail(f"the intended config does not parse: {intended}", "fix the config file")
    if isinstance(intended, OSError):
        return _fail(f"cannot read the intended config: {intended}", "check the config path")
    if reference is not None:
        try:
            choice = ReferenceChoice(load_config(reference), "named with --reference", 1)
        except ConfigParseError as exc:
            return _fail(f"the reference does not parse: {exc}", "fix or replace the reference")
        except OSError as exc:
            return _fail(f"cannot read the reference: {exc}", "name an existing reference file")
    else:
        candidates = find_config_candidates(repo, now=now, max_age_days=max_age_days)
        choice = choose_reference(intended, candidates)
    skipped = tuple(f"[skipped] unparsable candidate {e}" for e in choice.unparsable)
    if choice.reference is None:
        return _fail(
            f"no reference config: {choice.reason} (framework defaults are never a reference)",
            "name a reference run (--reference PATH)",
            skipped,
        )
    if on_reference is not None:
        on_reference(choice.reference.path)
    diff = diff_configs(choice.reference, intended, explain)
    return _finding(intended, choice.reference, choice.reason, diff, repo, skipped)


def _rel(path: Path, repo: Path) -> str:
    try:
        return str(path.resolve().relative_to(repo.resolve()))
    except ValueError:
        return str(path)


def _line(d: KeyDifference) -> str:
    text = d.describe()
    if d.slot is not None and d.material:
        text += f" — risky: {WHY_RISKY[d.slot]}"
    if not d.material:
        return f"[same] {text}"
    if d.explained_by:
        return f"[explained] {text} — why: {d.explained_by}"
    return f"[{'risky' if d.slot else 'unexplained'}] {text}"


def _issue_line(i: DiffIssue) -> str:
    if i.explained_by:
        return f"[explained] {i.message} — why: {i.explained_by}"
    return f"[{'risky' if i.risky else 'warn'}] {i.message}"


def _order(line: str) -> int:
    tags = ("[risky]", "[warn]", "[unexplained]", "[explained]", "[same]", "[note]")
    for rank, tag in enumerate(tags):
        if line.startswith(tag):
            return rank
    return len(line)


def _finding(
    intended: LoadedConfig,
    reference: LoadedConfig,
    reason: str,
    diff: ConfigDiff,
    repo: Path,
    skipped: tuple[str, ...],
) -> Finding:
    lines = [_line(d) for d in diff.differences] + [_issue_line(i) for i in diff.issues]
    lines += [f"[note] {n}" for n in diff.notes]
    details = tuple(sorted(lines, key=_order)) + skipped
    material = sum(1 for d in diff.differences if d.material)
    saw = (
        f"{_rel(intended.path, repo)} vs {_rel(reference.path, repo)} ({reason}): "
        f"{material} key difference(s), "
        f"{len(diff.risky_unexplained)} risky unexplained, "
        f"{len(diff.other_unexplained)} other unexplained, {len(diff.explained)} explained"
    )
    if diff.risky_unexplained:
        keys = ", ".join(dict.fromkeys(diff.risky_unexplained))
        action = f"explain or fix the risky keys ({keys}) with {_HOW_TO_EXPLAIN}"
        return Finding(CheckName.CONFIG_DIFF, Verdict.FAIL, saw, action, details)
    if diff.other_unexplained:
        keys = ", ".join(dict.fromkeys(diff.other_unexplained))
        action = f"confirm each change is intended ({keys}); explain with {_HOW_TO_EXPLAIN}"
        return Finding(CheckName.CONFIG_DIFF, Verdict.WARN, saw, action, details)
    return Finding(CheckName.CONFIG_DIFF, Verdict.PASS, saw, "none", details)
