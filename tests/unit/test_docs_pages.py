"""The README and the documentation pages (`docs/`) say what the code does: the exit-code table
is `producer/exitcodes.TABLE`, the state diagram is `worker/states.py`'s table (test_states.py),
every pre-flight waiver name is listed, every link and every file named under a project folder
exists, and the README stays a front page (the two commands first, at most about 250 lines)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from producer.exitcodes import TABLE
from producer.preflight.report import WAIVER_NAMES

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
TEXTS = {path: path.read_text() for path in [README, *PAGES]}


def test_the_exit_code_table_is_the_code_s() -> None:
    text = (DOCS / "reference" / "exit-codes.md").read_text()
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", text, re.M)
    assert [(int(c), m) for c, m in rows] == list(TABLE)


def test_every_waiver_name_is_listed_with_its_check() -> None:
    text = (DOCS / "reference" / "preflight-checks.md").read_text()
    listed = re.findall(r"^\| `([a-z-]+)` \|", text, re.M)
    assert listed == list(WAIVER_NAMES)


def test_every_link_points_into_the_repository() -> None:
    links = 0
    for path, text in TEXTS.items():
        for link in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" in link or link.startswith("mailto:"):
                continue
            links += 1
            assert (path.parent / link).exists(), f"{path.relative_to(ROOT)}: {link}"
    assert links > 50


def test_every_project_path_they_name_exists() -> None:
    named: set[str] = set()
    for text in TEXTS.values():
        named |= set(re.findall(r"`((?:producer|worker|ops|examples|tests|docs)/[\w./-]*)`", text))
    assert len(named) > 20
    # ops/secrets/ holds the deployment's secret files: never committed (the pages say so).
    missing = sorted(p for p in named - {"ops/secrets/"} if not (ROOT / p.rstrip("/")).exists())
    assert not missing, missing


def test_the_readme_is_a_front_page() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    first_block = text.split("```bash", 1)[1].split("```", 1)[0]
    assert [line.split()[:2] for line in first_block.strip().splitlines()] == [
        ["make", "demo"],
        ["make", "test"],
    ]
    for page in ("docs/first-job.md", "docs/rehearsal.md", "docs/reference/cli.md"):
        assert f"]({page})" in text, page


def test_every_page_is_in_the_site_s_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    missing = [str(p.relative_to(DOCS)) for p in PAGES if f" {p.relative_to(DOCS)}" not in nav]
    assert not missing, missing


_VARIABLE = re.compile(r"COLABQ_[A-Z0-9_]*[A-Z0-9]\b")


def _variables_in(*folders: str, suffixes: tuple[str, ...] = (".py", ".sh", ".yaml")) -> set[str]:
    found: set[str] = set()
    for folder in folders:
        base = ROOT / folder
        paths = [base] if base.is_file() else [p for p in base.rglob("*") if p.is_file()]
        for path in paths:
            if path.suffix in suffixes or path.name in ("Dockerfile",):
                found |= set(_VARIABLE.findall(path.read_text(errors="replace")))
    return found


def _aliases(model: type[Any]) -> set[str]:
    """The variables of renamed settings (a field's `validation_alias` choices)."""
    from pydantic import AliasChoices

    found: set[str] = set()
    for info in model.model_fields.values():
        if isinstance(info.validation_alias, AliasChoices):
            found |= {str(choice) for choice in info.validation_alias.choices}
    return found


def test_every_variable_the_product_reads_is_on_the_settings_page() -> None:
    from worker.settings import ENV_PREFIX, Settings

    page = (DOCS / "reference" / "settings.md").read_text()
    documented = {f"{ENV_PREFIX}{name}".upper() for name in Settings.model_fields}
    documented |= _aliases(Settings)
    documented |= set(_VARIABLE.findall(page))
    read = _variables_in("worker", "producer", "colabq", "compose.yaml", "Dockerfile")
    assert len(read) > 40
    missing = sorted(read - documented)
    assert not missing, missing


def test_every_variable_the_pages_name_exists() -> None:
    from worker.settings import ENV_PREFIX, Settings

    exists = _variables_in("worker", "producer", "colabq", "ops", "tests", "compose.yaml")
    exists |= {f"{ENV_PREFIX}{name}".upper() for name in Settings.model_fields}
    exists |= _aliases(Settings)
    exists.add("COLABQ_NAME")  # the settings file's `COLABQ_NAME=value` lines: a placeholder
    named: set[str] = set()
    for text in TEXTS.values():
        named |= set(_VARIABLE.findall(text))
    unknown = sorted(named - exists)
    assert not unknown, unknown
