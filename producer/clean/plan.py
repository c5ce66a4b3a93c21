"""What `colabq clean RUN` does, step by step: the restart/kill cleanup of one run, in the spec's
order (the command is `producer/commands/clean.py`).

Owns the four steps of the spec's "Restart and kill" section:
1. the run's local checkpoint folder: `--run-dir` (relative to `--repo-dir`), else by convention
   `<repo>/runs/<RUN>` and `<repo>/outputs/<RUN>`, each that exists; guarded by
   `check_local_run_dir` and `guard_run_folder` (named after the run, not a symlink, not
   holding the repository);
2. the remote artifact prefix of each of the run's jobs in the ledger: only with
   `--delete-remote`, and only through an `ArtifactDeleter` (a local store's folder, or a Hub
   prefix deleted in one commit: the repo's history keeps it, nothing is rewritten);
3. the tracker's run (`trackers.py`);
4. the run's Colab sessions and queued retries: cancel is requested for every job of the run
   that is not terminal, and one still QUEUED with no owner ends CANCELLED at once.
Everything about the run (its folders, its jobs) is read before step 1, so a refused path or an
unreachable Redis stops the command before anything is deleted. The sequence runner is
`steps.py`'s.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from producer.clean.guard import UnsafeCleanupPath
from producer.clean.steps import (
    Action,
    StepPlan,
    guard_run_folder,
    remove_tree,
    remove_tree_action,
)
from worker.states import TERMINAL, JobState

if TYPE_CHECKING:
    from producer.ask import Requests
    from worker.records.ledger import Ledger
    from worker.records.record import JobRecord
    from worker.settings import Settings
    from worker.spec import ArtifactDest
    from worker.store.hub import HubStore

RUN_FOLDERS = ("runs", "outputs")  # <repo>/<folder>/<RUN>: where a run's checkpoints live
MAX_JOBS_SCANNED = 10_000
_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # as `worker.spec.RUN_NAME_PATTERN`


class ArtifactDeleter(Protocol):
    def describe(self, dest: ArtifactDest) -> str: ...

    def exists(self, dest: ArtifactDest) -> bool: ...

    def delete(self, dest: ArtifactDest) -> None: ...


@dataclass(frozen=True)
class LocalStoreDeleter:
    """A rehearsal's local store: the prefix folder, behind the same guard as step 1."""

    run_name: str

    def folder(self, dest: ArtifactDest) -> Path:
        if not dest.prefix:
            raise UnsafeCleanupPath(dest.repo, "the job has no prefix: that is the whole store")
        path = Path(dest.repo) / dest.prefix
        return guard_run_folder(path, path, self.run_name, Path(dest.repo))

    def describe(self, dest: ArtifactDest) -> str:
        return str(Path(dest.repo) / dest.prefix)

    def exists(self, dest: ArtifactDest) -> bool:
        return os.path.lexists(self.folder(dest))

    def delete(self, dest: ArtifactDest) -> None:
        folder = self.folder(dest)
        remove_tree(folder, folder)


@dataclass(frozen=True)
class HubDeleter:
    """A Hub prefix, deleted in one commit (the repo's history keeps it; nothing rewritten)."""

    run_name: str
    settings: Settings

    def _store(self) -> HubStore:
        from producer.stage import build_hub_store

        return build_hub_store(self.settings)

    def describe(self, dest: ArtifactDest) -> str:
        kind = "datasets/" if dest.repo_type == "dataset" else ""
        return f"hf://{kind}{dest.repo}/{dest.prefix}"

    def exists(self, dest: ArtifactDest) -> bool:
        return bool(self._store().prefix_files(dest))

    def delete(self, dest: ArtifactDest) -> None:
        if self.run_name not in Path(dest.prefix).parts:
            raise UnsafeCleanupPath(self.describe(dest), "the prefix is not named after the run")
        self._store().delete_prefix(dest)


def build_deleters(run_name: str, settings: Settings) -> dict[str, ArtifactDeleter]:
    """The deleter per destination kind."""
    return {"local": LocalStoreDeleter(run_name), "hf": HubDeleter(run_name, settings)}


@dataclass(frozen=True)
class RunFacts:
    """What the cleanup works on, read before anything is changed."""

    run_name: str
    repo: Path
    run_dirs: tuple[Path, ...]  # real paths, guarded
    looked_at: tuple[Path, ...]  # where the run's folder was looked for
    jobs: tuple[JobRecord, ...]  # every job of the run in the ledger


def find_run_dirs(
    repo: Path, run_name: str, run_dir: Path | None
) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """(the run's folders that exist, guarded; where they were looked for)."""
    if run_dir is not None:
        written = [(run_dir, run_dir if run_dir.is_absolute() else repo / run_dir)]
    else:
        written = [(Path(f) / run_name, repo / f / run_name) for f in RUN_FOLDERS]
    found = [guard_run_folder(w, path, run_name, repo) for w, path in written]
    present = tuple(real for real, (_, path) in zip(found, written, strict=True) if path.exists())
    return present, tuple(path for _, path in written)


def find_run_jobs(ledger: Ledger, run_name: str) -> tuple[JobRecord, ...]:
    return tuple(r for r in ledger.list_jobs(MAX_JOBS_SCANNED) if r.spec.run_name == run_name)


def plan_local_step(facts: RunFacts) -> StepPlan:
    title = "local checkpoint folder"
    actions = [remove_tree_action(d, d, "the run folder") for d in facts.run_dirs if d.exists()]
    looked = ", ".join(str(p) for p in facts.looked_at)
    return StepPlan(title, tuple(actions), nothing="" if actions else f"no run folder at {looked}")


def _dest_uri(dest: ArtifactDest) -> str:
    if dest.kind == "hf":
        return f"hf://{dest.repo_type}s/{dest.repo}/{dest.prefix}".rstrip("/")
    return str(Path(dest.repo) / dest.prefix)


def _delete_dest_action(deleter: ArtifactDeleter, dest: ArtifactDest) -> Action:
    def check() -> str | None:
        return f"{deleter.describe(dest)} still exists" if deleter.exists(dest) else None

    return Action(
        f"delete the artifacts at {deleter.describe(dest)}", lambda: deleter.delete(dest), check
    )


def plan_remote_step(
    facts: RunFacts, *, delete_remote: bool, deleters: Mapping[str, ArtifactDeleter]
) -> StepPlan:
    title = "remote artifacts"
    dests = list(dict.fromkeys(r.spec.artifact for r in facts.jobs))
    if not dests:
        return StepPlan(title, nothing=f"no job of {facts.run_name} in the ledger stores artifacts")
    if not delete_remote:
        where = ", ".join(_dest_uri(d) for d in dests)
        return StepPlan(
            title,
            skipped=(
                f"deleting stored artifacts needs its own flag, --delete-remote (would delete "
                f"{where})",
            ),
        )
    actions: list[Action] = []
    skipped: list[str] = []
    nothing: list[str] = []
    for dest in dests:
        deleter = deleters.get(dest.kind)
        if deleter is None:
            skipped.append(
                f"{_dest_uri(dest)}: not available (colabq cannot delete {dest.kind}:// "
                "prefixes yet); delete it by hand"
            )
        elif deleter.exists(dest):
            actions.append(_delete_dest_action(deleter, dest))
        else:
            nothing.append(f"{deleter.describe(dest)} is already gone")
    return StepPlan(title, tuple(actions), tuple(skipped), "; ".join(nothing))


def _cancel_action(asks: Requests, job: JobRecord, reason: str) -> Action:
    queued = job.state is JobState.QUEUED and not job.owner
    ledger = asks.ledger

    def do() -> None:
        asks.cancel([job.job_id], reason)

    def check() -> str | None:
        now = ledger.get(job.job_id)
        if now.state in TERMINAL or ledger.cancel_requested(job.job_id) is not None:
            return None
        return f"job {job.job_id} is {now.state.name} and no cancel is recorded on it"

    what = (
        "it ends CANCELLED"
        if queued
        else f"its runner stops the Colab session (follow with `colabq status {job.job_id}`)"
    )
    text = f"request cancel of job {job.job_id} ({job.state.name}): {what}"
    return Action(text, do, check)


def plan_jobs_step(facts: RunFacts, asks: Requests) -> StepPlan:
    title = "Colab session and queued retries"
    live = [asks.ledger.get(j.job_id) for j in facts.jobs]  # read again: states move on
    reason = f"colabq clean {facts.run_name}"
    actions = [_cancel_action(asks, j, reason) for j in live if j.state not in TERMINAL]
    nothing = (
        "" if actions else f"{len(live)} job(s) of the run in the ledger, none queued or running"
    )
    return StepPlan(title, tuple(actions), nothing=nothing)


def build_planners(
    facts: RunFacts,
    asks: Requests,
    *,
    delete_remote: bool,
    trackers: Sequence[str],
    env: Mapping[str, str],
    deleters: Mapping[str, ArtifactDeleter],
) -> list[Callable[[], StepPlan]]:
    # Here, not at the top: the tracker step pulls in the pre-flight's scanners, which every
    # other command would otherwise pay for at start-up.
    from producer.clean.trackers import detect, plan_tracker_step

    found = detect(facts.repo, env, trackers)
    return [
        lambda: plan_local_step(facts),
        lambda: plan_remote_step(facts, delete_remote=delete_remote, deleters=deleters),
        lambda: plan_tracker_step(found, run_name=facts.run_name, run_dirs=facts.run_dirs, env=env),
        lambda: plan_jobs_step(facts, asks),
    ]
