"""The cleanup sequence: shown before done, a dry run changes nothing, each step verified before
the next; the run-folder guard; the tracker step with a fake tracker client."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from producer.clean.guard import UnsafeCleanupPath
from producer.clean.steps import (
    Action,
    CleanupStopped,
    Outcome,
    StepPlan,
    guard_run_folder,
    run_steps,
    summarise,
)
from producer.clean.trackers import TrackerRuns, event_folders, plan_tracker_step
from producer.preflight.monitoring import Tracker

RUN = "coco-detr-r50-bs64-lr1e-4"


@dataclass
class Journal:
    lines: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    planned: list[int] = field(default_factory=list)

    def action(self, name: str, *, verified: bool = True) -> Action:
        return Action(
            f"do {name}",
            lambda: self.done.append(name),
            lambda: None if verified else f"{name} is still there",
        )

    def planner(self, number: int, plan: StepPlan) -> Callable[[], StepPlan]:
        def make() -> StepPlan:
            self.planned.append(number)
            return plan

        return make


def test_a_dry_run_shows_every_step_and_does_nothing() -> None:
    j = Journal()
    planners = [
        j.planner(1, StepPlan("one", (j.action("a"),))),
        j.planner(2, StepPlan("two", skipped=("needs --flag",))),
        j.planner(3, StepPlan("three", nothing="nothing found here")),
    ]
    results = run_steps(planners, act=False, run_name=RUN, say=j.lines.append)
    assert j.done == []
    assert j.lines == [
        "1. one: would do a",
        "2. two: skipped — needs --flag",
        "3. three: nothing to do — nothing found here",
    ]
    assert [r.outcome for r in results] == [Outcome.PLANNED, Outcome.SKIPPED, Outcome.NOTHING]
    assert "Dry run: nothing was changed" in summarise(results, act=False)
    assert "Left as it was (see above): two." in summarise(results, act=False)


def test_acting_verifies_each_step_before_planning_the_next() -> None:
    j = Journal()
    planners = [
        j.planner(1, StepPlan("one", (j.action("a"), j.action("b")))),
        j.planner(2, StepPlan("two", (j.action("c"),))),
    ]
    results = run_steps(planners, act=True, run_name=RUN, say=j.lines.append)
    assert j.done == ["a", "b", "c"]
    assert j.lines == ["1. one: do a", "1. one: verified", "1. one: do b", "1. one: verified",
                       "2. two: do c", "2. two: verified"]  # fmt: skip
    assert [r.outcome for r in results] == [Outcome.DONE, Outcome.DONE]
    assert "Dry run" not in summarise(results, act=True)


def test_an_unverified_step_stops_the_sequence() -> None:
    j = Journal()
    planners = [
        j.planner(1, StepPlan("one", (j.action("a", verified=False), j.action("b")))),
        j.planner(2, StepPlan("two", (j.action("c"),))),
    ]
    with pytest.raises(CleanupStopped) as caught:
        run_steps(planners, act=True, run_name=RUN, say=j.lines.append)
    assert j.done == ["a"] and j.planned == [1]
    assert str(caught.value).startswith("Cleanup stopped at step 1 (one): a is still there.")
    assert f"colabq clean {RUN} --yes" in str(caught.value)


def test_a_failing_action_or_planner_stops_the_sequence() -> None:
    def boom() -> None:
        raise PermissionError("read-only file system")

    failing = StepPlan("one", (Action("delete x", boom, lambda: None),))
    with pytest.raises(CleanupStopped, match="delete x failed: read-only file system"):
        run_steps([lambda: failing], act=True, run_name=RUN, say=lambda _: None)

    def bad_plan() -> StepPlan:
        raise OSError("gone")

    with pytest.raises(CleanupStopped, match="could not be planned: gone"):
        run_steps([bad_plan], act=False, run_name=RUN, say=lambda _: None)


def test_the_run_folder_guard(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    good = repo / "runs" / RUN
    good.mkdir(parents=True)
    assert guard_run_folder(Path("runs") / RUN, good, RUN, repo) == good.resolve()
    nested = tmp_path / "ckpt" / RUN / "seed0"
    assert guard_run_folder(nested, nested, RUN, repo) == nested  # need not exist yet
    refused = [
        (repo / "runs", "no part of its path is named"),
        (repo, "no part of its path is named"),
        (repo / "runs" / RUN / ".." / "..", "contains '..'"),
        (Path("/"), "filesystem root"),
    ]
    for folder, phrase in refused:
        with pytest.raises(UnsafeCleanupPath, match=phrase):
            guard_run_folder(folder, folder, RUN, repo)
    with pytest.raises(UnsafeCleanupPath, match="home folder"):
        guard_run_folder(Path("~") / RUN, repo / "~" / RUN, RUN, repo)
    (tmp_path / "data").mkdir()
    link = repo / "outputs" / RUN
    link.parent.mkdir()
    link.symlink_to(tmp_path / "data")
    with pytest.raises(UnsafeCleanupPath, match="symlink"):
        guard_run_folder(link, link, RUN, repo)


@dataclass
class FakeRuns:
    """An in-memory tracker project; `sticky` runs survive delete (a tracker that lies)."""

    runs: dict[str, str]  # id → name
    sticky: frozenset[str] = frozenset()
    where: str = "fake project p"

    def find(self, run_name: str) -> list[str]:
        return [i for i, name in self.runs.items() if name == run_name]

    def delete(self, run_id: str) -> None:
        if run_id not in self.sticky:
            del self.runs[run_id]


def _factory(runs: TrackerRuns | str) -> Callable[..., TrackerRuns | str]:
    return lambda tracker, env: runs


def test_tracker_runs_are_found_deleted_and_searched_for_again() -> None:
    fake = FakeRuns({"r1": RUN, "r2": RUN, "r3": "another-run"})
    plan = plan_tracker_step(
        (Tracker.WANDB,), run_name=RUN, run_dirs=(), env={}, runs_factory=_factory(fake)
    )
    assert [a.text for a in plan.actions] == [
        f"delete 2 run(s) named {RUN!r} in the fake project p"
    ]
    run_steps([lambda: plan], act=True, run_name=RUN, say=lambda _: None)
    assert fake.runs == {"r3": "another-run"}


def test_a_tracker_that_keeps_the_run_is_not_reported_done() -> None:
    fake = FakeRuns({"r1": RUN}, sticky=frozenset({"r1"}))
    plan = plan_tracker_step(
        (Tracker.MLFLOW,), run_name=RUN, run_dirs=(), env={}, runs_factory=_factory(fake)
    )
    with pytest.raises(CleanupStopped, match=r"1 run\(s\) named .* still in the fake project"):
        run_steps([lambda: plan], act=True, run_name=RUN, say=lambda _: None)


@pytest.mark.parametrize(
    ("trackers", "reason", "skipped", "actions"),
    [
        ((Tracker.WANDB,), "the wandb client library is not installed here", 1, 0),
        ((Tracker.NEPTUNE,), "colabq has no neptune cleaner", 1, 0),
        ((), None, 0, 0),
    ],
)
def test_a_tracker_that_cannot_be_cleaned_is_skipped_with_its_reason(
    trackers: tuple[Tracker, ...], reason: str | None, skipped: int, actions: int
) -> None:
    plan = plan_tracker_step(
        trackers, run_name=RUN, run_dirs=(), env={}, runs_factory=_factory(reason or "")
    )
    assert len(plan.skipped) == skipped and len(plan.actions) == actions
    if reason:
        assert reason in plan.skipped[0] and "would delete the run named" in plan.skipped[0]
    else:
        assert "no tracker" in plan.nothing


def test_tensorboard_event_folders_under_the_run_folder(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / RUN
    (run_dir / "tb" / "train").mkdir(parents=True)
    (run_dir / "tb" / "events.out.tfevents.1.h").write_text("e")
    (run_dir / "tb" / "train" / "events.out.tfevents.2.h").write_text("e")
    (run_dir / "ckpt").mkdir()
    (run_dir / "ckpt" / "last.pt").write_text("w")
    assert event_folders([run_dir]) == [run_dir / "tb"]  # the outermost only
    plan = plan_tracker_step((Tracker.TENSORBOARD,), run_name=RUN, run_dirs=(run_dir,), env={})
    run_steps([lambda: plan], act=True, run_name=RUN, say=lambda _: None)
    assert not (run_dir / "tb").exists() and (run_dir / "ckpt" / "last.pt").exists()
    empty = plan_tracker_step((Tracker.TENSORBOARD,), run_name=RUN, run_dirs=(run_dir,), env={})
    assert empty.actions == () and "no event files" in empty.nothing
