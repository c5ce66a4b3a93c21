"""The README says what the code does: its exit-code table is `producer/exitcodes.TABLE`, and
every file it links or names under a project folder exists in the repository."""

from __future__ import annotations

import re
from pathlib import Path

from producer.exitcodes import TABLE

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_the_exit_code_table_is_the_code_s() -> None:
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", README, re.M)
    assert [(int(c), m) for c, m in rows] == list(TABLE)


def test_every_link_points_into_the_repository() -> None:
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    assert links, "the README links its example repository"
    for link in links:
        if "://" in link:
            continue
        assert (ROOT / link).exists(), link


def test_every_project_path_it_names_exists() -> None:
    named = set(re.findall(r"`((?:producer|worker|ops|examples|tests)/[\w./-]*)`", README))
    assert len(named) > 20
    # ops/secrets/ holds the deployment's secret files: never committed (the README says so).
    missing = sorted(p for p in named - {"ops/secrets/"} if not (ROOT / p.rstrip("/")).exists())
    assert not missing, missing
