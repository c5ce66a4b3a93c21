"""Finding config candidates (depth, age, suffix) and choosing the reference run."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from producer.preflight.config_check import check_config_diff
from producer.preflight.configs import load_config
from producer.preflight.discovery import choose_reference, family_token, find_config_candidates
from producer.preflight.report import Verdict

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def _put(repo: Path, rel: str, text: str = "seed: 1\n", age_days: float = 1.0) -> Path:
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    stamp = (NOW - timedelta(days=age_days)).timestamp()
    os.utime(path, (stamp, stamp))
    return path


# (relative path, age in days, found?)
FILES = [
    ("configs/a.yaml", 1, True),
    ("configs/x/b.yml", 2, True),
    ("configs/x/y/c.json", 3, True),  # depth 3: the deepest `find -maxdepth 3` lists
    ("configs/x/y/z/d.toml", 1, False),  # depth 4
    ("recipes/r.toml", 29.5, True),
    ("experiments/e.json", 10, True),
    ("configs/old.yaml", 31, False),  # older than 30 days
    ("configs/notes.txt", 1, False),  # not a config suffix
    ("configs/upper.YAML", 1, False),  # `find -name '*.yaml'` is case-sensitive too
    ("other/o.yaml", 1, False),  # not under configs/ recipes/ experiments/
]


def test_candidates_follow_find_semantics(tmp_path: Path) -> None:
    for rel, age, _ in FILES:
        _put(tmp_path, rel, age_days=age)
    found = {str(c.path.relative_to(tmp_path)) for c in find_config_candidates(tmp_path, now=NOW)}
    assert found == {rel for rel, _, wanted in FILES if wanted}


def test_candidates_are_newest_first_and_skip_symlinked_folders(tmp_path: Path) -> None:
    _put(tmp_path, "configs/older.yaml", age_days=5)
    _put(tmp_path, "configs/newer.yaml", age_days=1)
    _put(tmp_path, "elsewhere/linked.yaml")
    (tmp_path / "configs" / "link").symlink_to(tmp_path / "elsewhere")
    names = [c.path.name for c in find_config_candidates(tmp_path, now=NOW)]
    assert names == ["newer.yaml", "older.yaml"]


def test_missing_roots_give_no_candidates(tmp_path: Path) -> None:
    assert find_config_candidates(tmp_path, now=NOW) == ()


@pytest.mark.parametrize(
    ("name", "token"),
    [
        ("resnet50_bs512.yaml", "resnet50"),
        ("baseline_v1.yaml", None),
        ("v2-vit-b16.json", "vit"),
        ("exp_003_swin.toml", "swin"),
    ],
)
def test_family_token(name: str, token: str | None) -> None:
    assert family_token(Path(name)) == token


def _choose(repo: Path, intended: Path) -> str | None:
    choice = choose_reference(load_config(intended), find_config_candidates(repo, now=NOW))
    return None if choice.reference is None else choice.reference.path.name


def test_reference_is_newest_in_same_folder_not_itself(tmp_path: Path) -> None:
    _put(tmp_path, "configs/vit/old.yaml", age_days=9)
    _put(tmp_path, "configs/vit/recent.yaml", age_days=2)
    _put(tmp_path, "configs/resnet/newest.yaml", age_days=1)  # other family, newer
    intended = _put(tmp_path, "configs/vit/intended.yaml", age_days=0)
    assert _choose(tmp_path, intended) == "recent.yaml"


def test_reference_by_shared_name_token_across_folders(tmp_path: Path) -> None:
    _put(tmp_path, "recipes/swin_t_base.yaml", age_days=3)
    _put(tmp_path, "configs/vit_b16.yaml", age_days=1)
    intended = _put(tmp_path, "experiments/swin_t_bs512.yaml", age_days=0)
    assert _choose(tmp_path, intended) == "swin_t_base.yaml"


def test_declared_model_overrules_a_path_match(tmp_path: Path) -> None:
    _put(tmp_path, "configs/det/a.yaml", "model:\n  name: yolo\n", age_days=1)
    _put(tmp_path, "configs/det/b.yaml", "model:\n  name: detr\n", age_days=2)
    intended = _put(tmp_path, "configs/det/new.yaml", "model:\n  name: detr\n", age_days=0)
    assert _choose(tmp_path, intended) == "b.yaml"


def test_reference_by_declared_task_when_no_path_matches(tmp_path: Path) -> None:
    _put(tmp_path, "configs/unrelated.yaml", "task: segmentation\n", age_days=1)
    _put(tmp_path, "recipes/some/thing.yaml", "task: detection\n", age_days=2)
    intended = _put(tmp_path, "experiments/mine.yaml", "task: detection\n", age_days=0)
    assert _choose(tmp_path, intended) == "thing.yaml"


def test_no_reference_when_nothing_matches(tmp_path: Path) -> None:
    _put(tmp_path, "configs/alpha.yaml", "task: segmentation\n")
    intended = _put(tmp_path, "experiments/beta.yaml", "task: detection\n", age_days=0)
    assert _choose(tmp_path, intended) is None


def test_unparsable_candidate_is_skipped_and_noted(tmp_path: Path) -> None:
    _put(tmp_path, "configs/vit/broken.yaml", "a: [\n", age_days=1)
    _put(tmp_path, "configs/vit/good.yaml", age_days=2)
    intended = _put(tmp_path, "configs/vit/new.yaml", age_days=0)
    finding = check_config_diff(
        load_config(intended), repo=tmp_path, reference=None, explain={}, now=NOW
    )
    assert "good.yaml" in finding.saw
    assert any(
        "[skipped] unparsable candidate" in d and "broken.yaml:2" in d for d in finding.details
    )


def test_no_reference_fails_asking_for_one(tmp_path: Path) -> None:
    intended = _put(tmp_path, "configs/only.yaml", age_days=0)
    finding = check_config_diff(
        load_config(intended), repo=tmp_path, reference=None, explain={}, now=NOW
    )
    assert finding.verdict is Verdict.FAIL
    assert finding.next_action == "name a reference run (--reference PATH)"
    assert "framework defaults are never a reference" in finding.saw


def test_intended_config_reached_through_a_symlink_is_not_its_own_reference(
    tmp_path: Path,
) -> None:
    _put(tmp_path, "configs/vit/new.yaml", age_days=0)
    _put(tmp_path, "configs/vit/older.yaml", age_days=3)
    (tmp_path / "alias").symlink_to(tmp_path / "configs")
    choice = choose_reference(
        load_config(tmp_path / "alias" / "vit" / "new.yaml"),
        find_config_candidates(tmp_path, now=NOW),
    )
    assert choice.reference is not None
    assert choice.reference.path.name == "older.yaml"


def test_stale_reference_is_not_used(tmp_path: Path) -> None:
    _put(tmp_path, "configs/vit/ancient.yaml", age_days=45)
    intended = _put(tmp_path, "configs/vit/new.yaml", age_days=0)
    assert _choose(tmp_path, intended) is None
