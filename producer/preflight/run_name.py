"""The `run-name` check: a name that says what the experiment is and is safe as a path.

Owns the naming rules of the checklist: the name is used for the tracker, the checkpoint
folder, the Hub path prefix and every report, so it must be plain English
(`<dataset/task>-<model>-<key-config>-<distinctive-recipe-piece>`), free of labels that only
mean something inside one planning session, and a safe path segment and Hub name.
Verdicts: FAIL for an unsafe name, a planning-session label or a bare counter; WARN for a name
too short to describe the experiment; PASS otherwise.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from producer.preflight.report import CheckName, Finding, Verdict, worst_verdict

MAX_NAME_LEN = 96  # the Hub's limit for a repo name
MIN_MEANINGFUL_TOKENS = 3
PATTERN = "<dataset/task>-<model>-<key-config>-<distinctive-recipe-piece>"
EXAMPLE = "coco-baseline-bs256-lr3e-4"

_SEP = r"(?:^|(?<=[-_.]))"
_END = r"(?=$|[-_.])"
_PLANNING: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(_SEP + r"(wave|phase|stage|sprint)[-_.]?\d+" + _END, re.I), "a planning step"),
    (re.compile(_SEP + r"internal" + _END, re.I), "an internal-only marker"),
    (re.compile(_SEP + r"m\d+[-_.]only" + _END, re.I), "a milestone-only marker"),
    (re.compile(_SEP + r"gated" + _END, re.I), "a gating marker"),
)
_GENERIC = frozenset(
    {
        "run",
        "runs",
        "exp",
        "expt",
        "experiment",
        "test",
        "testing",
        "trial",
        "try",
        "attempt",
        "debug",
        "tmp",
        "temp",
        "foo",
        "bar",
        "baz",
        "new",
        "final",
        "job",
        "train",
        "training",
        "model",
        "v",
        "ver",
        "version",
        "copy",
        "untitled",
        "my",
        "sample",
        "demo",
        "x",
        "wip",
    }
)
_STOPWORDS = frozenset({"from", "to", "the", "and", "of", "with", "on", "in", "for", "vs", "via"})


@dataclass(frozen=True)
class NameProblem:
    verdict: Verdict
    reason: str


def _unsafe(name: str) -> list[str]:
    reasons: list[str] = []
    if not name:
        return ["is empty"]
    if len(name) > MAX_NAME_LEN:
        reasons.append(f"is {len(name)} characters (over {MAX_NAME_LEN}, the Hub's limit)")
    if "/" in name or "\\" in name:
        reasons.append("contains a path separator ('/' or '\\')")
    if ".." in name:
        reasons.append("contains '..' (a parent-folder reference)")
    if name.startswith("."):
        reasons.append("starts with '.' (a hidden or relative path)")
    if name.startswith("-"):
        reasons.append("starts with '-' (read as a command-line option)")
    if name.endswith((".", "-")):
        reasons.append("ends with '.' or '-' (not allowed in a Hub name)")
    if "--" in name:
        reasons.append("contains '--' (reserved in Hub names)")
    if any(ch.isspace() for ch in name):
        reasons.append("contains whitespace")
    if any(unicodedata.category(ch).startswith("C") for ch in name if not ch.isspace()):
        reasons.append("contains control characters")
    others = sorted({ch for ch in name if not re.match(r"[A-Za-z0-9._\-\s/\\]", ch)})
    if others and not all(unicodedata.category(ch).startswith("C") for ch in others):
        shown = " ".join(repr(ch) for ch in others if not unicodedata.category(ch).startswith("C"))
        reasons.append(f"has characters outside [A-Za-z0-9._-]: {shown}")
    return reasons


def _tokens(name: str) -> list[str]:
    return [t for t in re.split(r"[-_.]+", name.lower()) if t]


def meaningful_tokens(name: str) -> list[str]:
    return [
        t
        for t in _tokens(name)
        if len(t) >= 2
        and re.search("[a-z]", t)
        and t not in _GENERIC
        and t not in _STOPWORDS
        and not any(p.fullmatch(t) for p, _ in _PLANNING)
    ]


def _is_bare_counter(name: str) -> bool:
    words = re.findall(r"[a-z]+|\d+", name.lower())
    return bool(words) and all(w.isdigit() or w in _GENERIC for w in words)


def find_name_problems(name: str) -> tuple[NameProblem, ...]:
    """Every rule the name breaks, each with its verdict and the reason in words."""
    problems = [
        NameProblem(Verdict.FAIL, f"unsafe as a path or Hub name: {r}") for r in _unsafe(name)
    ]
    for pattern, what in _PLANNING:
        for match in pattern.finditer(name):
            label = match.group(0)
            problems.append(
                NameProblem(
                    Verdict.FAIL,
                    f"{label!r} is {what}: a label that only "
                    "means something inside one planning session",
                )
            )
    if name and _is_bare_counter(name):
        problems.append(
            NameProblem(
                Verdict.FAIL, "a bare counter or placeholder: it says nothing about the experiment"
            )
        )
    else:
        found = meaningful_tokens(name)
        if name and len(found) < MIN_MEANINGFUL_TOKENS:
            problems.append(
                NameProblem(
                    Verdict.WARN,
                    f"too short to describe the experiment "
                    f"({len(found)} meaningful part(s): {', '.join(found) or 'none'}; "
                    f"want at least {MIN_MEANINGFUL_TOKENS})",
                )
            )
    return tuple(problems)


def suggest_safe(name: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name)
    safe = re.sub(r"-{2,}", "-", re.sub(r"\.{2,}", ".", safe))
    return safe.strip(".-")[:MAX_NAME_LEN].strip(".-")


def check_run_name(name: str) -> Finding:
    problems = find_name_problems(name)
    if not problems:
        return Finding(
            CheckName.RUN_NAME,
            Verdict.PASS,
            f"{name!r}: describes the experiment and is path-safe",
            "none",
        )
    verdict = worst_verdict(p.verdict for p in problems)
    saw = f"{name!r}: {problems[0].reason}"
    if len(problems) > 1:
        saw += f" (and {len(problems) - 1} more)"
    action = f"rename it as {PATTERN}, e.g. {EXAMPLE}"
    if any(p.reason.startswith("unsafe") for p in problems) and suggest_safe(name):
        action += f"; a path-safe spelling would be {suggest_safe(name)!r}"
    return Finding(CheckName.RUN_NAME, verdict, saw, action, tuple(p.reason for p in problems))
