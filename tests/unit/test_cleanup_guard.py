"""The cleanup path guard: nothing outside the run's own folder is ever deleted."""

from __future__ import annotations

from pathlib import Path

import pytest

from producer.clean.guard import UnsafeCleanupPath, check_local_run_dir
from worker.errors import UserInputError


@pytest.fixture
def run_root(tmp_path: Path) -> Path:
    root = tmp_path / "runs" / "coco-detr-r50-bs64"
    (root / "checkpoints").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (root / "escape").symlink_to(tmp_path / "elsewhere")
    (root / "inner-link").symlink_to(root / "checkpoints")
    return root


# (path as given, relative to the run folder when relative; the reason phrase)
REFUSED = [
    ("/", "filesystem root"),
    ("~", "home folder ('~')"),
    ("~/runs/x", "home folder ('~')"),
    ("/root", "home folder"),
    ("/home/x", "home folder"),
    ("/home", "holds home folders"),
    ("run/../..", "contains '..'"),
    ("checkpoints/../../other-run", "contains '..'"),
    ("escape", "symlink"),
    ("escape/sub", "symlink"),
    ("/etc", "top-level"),
]


@pytest.mark.parametrize(("given", "phrase"), REFUSED)
def test_dangerous_paths_are_refused(run_root: Path, given: str, phrase: str) -> None:
    with pytest.raises(UnsafeCleanupPath) as caught:
        check_local_run_dir(Path(given), run_root)
    assert phrase in str(caught.value)
    assert isinstance(caught.value, UserInputError)


def test_sibling_run_is_refused(run_root: Path) -> None:
    with pytest.raises(UnsafeCleanupPath, match="outside the run's folder"):
        check_local_run_dir(run_root.parent / "another-run", run_root)


@pytest.mark.parametrize(
    ("root", "phrase"),
    [
        (Path("/"), "filesystem root"),
        (Path("/root"), "home folder"),
        (Path("/home/someone"), "home folder"),
        (Path("/tmp"), "top-level"),
        (Path("runs/relative"), "absolute"),
        (Path("/srv/runs/../x"), "contains '..'"),
    ],
)
def test_dangerous_run_roots_are_refused(root: Path, phrase: str) -> None:
    with pytest.raises(UnsafeCleanupPath, match=phrase.replace("(", r"\(").replace(")", r"\)")):
        check_local_run_dir(Path("/srv/runs/x/checkpoints"), root)


@pytest.mark.parametrize("given", [".", "checkpoints", "inner-link", "checkpoints/step-100"])
def test_paths_inside_the_run_folder_are_accepted(run_root: Path, given: str) -> None:
    resolved = check_local_run_dir(Path(given), run_root)
    assert resolved.is_relative_to(run_root.resolve())


def test_absolute_path_inside_is_accepted_and_resolved(run_root: Path) -> None:
    assert (
        check_local_run_dir(run_root / "checkpoints", run_root)
        == (run_root / "checkpoints").resolve()
    )
