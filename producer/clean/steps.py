"""The machinery of `colabq clean`: planned steps, shown before they are done, verified after.

Owns `StepPlan` (what one step will do, decided just before it runs: its actions, the parts it
skips and why), `run_steps` (show each step; in a dry run stop there; otherwise act, verify, and
stop the whole sequence at the first action that fails or cannot be verified) and the guarded
removal of a local folder that steps 1 and 3 share. What each step plans is `plan.py`'s and
`trackers.py`'s.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from producer.clean.guard import UnsafeCleanupPath, check_local_run_dir
from worker.errors import ColabqError


class Outcome(StrEnum):
    DONE = "done"  # acted and verified
    PLANNED = "planned"  # dry run: shown, not done
    SKIPPED = "skipped"  # something was left, for the reason shown
    NOTHING = "nothing"  # nothing to clean


@dataclass(frozen=True)
class Action:
    """One change: `check` returns None once it is verified, else what is still there."""

    text: str  # "delete /srv/runs/x (12 files, 3.1 MB)"
    do: Callable[[], None]
    check: Callable[[], str | None]


@dataclass(frozen=True)
class StepPlan:
    title: str
    actions: tuple[Action, ...] = ()
    skipped: tuple[str, ...] = ()  # left undone, each with its reason and what to do instead
    nothing: str = ""  # why there is nothing to do, when there is no action and no skip


@dataclass(frozen=True)
class StepResult:
    number: int
    title: str
    outcome: Outcome


class CleanupStopped(ColabqError):
    """A step failed or could not be verified: the steps after it were not run."""

    def __init__(self, number: int, title: str, problem: str, run_name: str) -> None:
        super().__init__(
            f"Cleanup stopped at step {number} ({title}): {problem}. Nothing after it was done; "
            f"fix that, then run `colabq clean {run_name} --yes` again."
        )
        self.number, self.title, self.problem = number, title, problem


def run_steps(
    planners: Sequence[Callable[[], StepPlan]],
    *,
    act: bool,
    run_name: str,
    say: Callable[[str], None],
) -> tuple[StepResult, ...]:
    """Plan, show and (with `act`) do and verify each step in order; raise `CleanupStopped`."""
    results: list[StepResult] = []
    for number, planner in enumerate(planners, 1):
        try:
            plan = planner()  # planned only now: the earlier steps changed what there is
        except (OSError, ColabqError) as exc:
            raise CleanupStopped(
                number, f"step {number}", f"it could not be planned: {exc}", run_name
            ) from exc
        head = f"{number}. {plan.title}:"
        for reason in plan.skipped:
            say(f"{head} skipped — {reason}")
        if plan.nothing or not (plan.actions or plan.skipped):
            say(f"{head} nothing to do — {plan.nothing or 'nothing found'}")
        if not plan.actions:
            outcome = Outcome.SKIPPED if plan.skipped else Outcome.NOTHING
            results.append(StepResult(number, plan.title, outcome))
            continue
        for action in plan.actions:
            say(f"{head} {'' if act else 'would '}{action.text}")
            if not act:
                continue
            try:
                action.do()
                problem = action.check()
            except (OSError, ColabqError) as exc:
                problem = f"{action.text} failed: {exc}"
            if problem is not None:
                raise CleanupStopped(number, plan.title, problem, run_name)
            say(f"{head} verified")
        done = Outcome.DONE if act else Outcome.PLANNED
        results.append(StepResult(number, plan.title, Outcome.SKIPPED if plan.skipped else done))
    return tuple(results)


def summarise(results: Sequence[StepResult], *, act: bool) -> str:
    counts = {o: sum(1 for r in results if r.outcome is o) for o in Outcome}
    parts = [f"{n} {o.value}" for o, n in counts.items() if n]
    tail = "" if act else " Dry run: nothing was changed; add --yes to do it."
    skipped = [r.title for r in results if r.outcome is Outcome.SKIPPED]
    if skipped:
        tail += f" Left as it was (see above): {', '.join(skipped)}."
    return f"{len(results)} steps: {', '.join(parts)}.{tail}"


def guard_run_folder(written: Path, folder: Path, run_name: str, repo: Path) -> Path:
    """The real path of a run's own folder, or `UnsafeCleanupPath` (nothing deleted).

    Beyond `check_local_run_dir`: the folder must be named after the run somewhere in its path
    (so `runs/` or a data folder is never taken for it), must not itself be a symlink (its
    target would be deleted), and must not hold the training repository.
    """
    if str(written).startswith("~"):
        raise UnsafeCleanupPath(written, "it names a home folder ('~'); give the folder's path")
    real = check_local_run_dir(folder, folder)
    if os.path.islink(folder):
        raise UnsafeCleanupPath(written, f"it is a symlink to {real}; name the folder itself")
    if run_name not in Path(os.path.normpath(folder)).parts or run_name not in real.parts:
        raise UnsafeCleanupPath(
            written, f"it is not the run's own folder: no part of its path is named {run_name!r}"
        )
    if Path(os.path.realpath(repo)).is_relative_to(real):
        raise UnsafeCleanupPath(written, "it holds the training repository")
    return real


def describe_tree(path: Path) -> str:
    files = size = 0
    for folder, _, names in os.walk(path):  # does not follow symlinked folders
        for name in names:
            files += 1
            try:
                size += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                continue
    return f"{files} file(s), {size / 1e6:.1f} MB"


def remove_tree(path: Path, root: Path) -> None:
    """Delete `path` (already guarded), checking again right before that it is in `root`."""
    check_local_run_dir(path, root)  # again: a symlink may have appeared since planning
    if os.path.islink(path):
        os.unlink(path)
    elif os.path.exists(path):
        shutil.rmtree(path)


def remove_tree_action(path: Path, root: Path, what: str) -> Action:
    def check() -> str | None:
        return f"{path} still exists" if os.path.lexists(path) else None

    text = f"delete {what} {path} ({describe_tree(path)})"
    return Action(text, lambda: remove_tree(path, root), check)
