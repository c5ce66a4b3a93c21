"""`colabq clean RUN`: dangerous folders refused, a dry run by default, the run's jobs cancelled,
stored artifacts only with --delete-remote."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from producer.cli import app
from tests.factories import make_spec
from worker.records.ledger import Ledger
from worker.spec import ArtifactDest
from worker.states import JobState

runner = CliRunner()
RUN = "coco-detr-r50-bs64-lr1e-4"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with the run's checkpoints in runs/RUN, another run beside it, data."""
    root = tmp_path / "work" / "repo"
    (root / "runs" / RUN / "checkpoints").mkdir(parents=True)
    (root / "runs" / RUN / "checkpoints" / "last.pt").write_text("weights")
    (root / "runs" / "other-run").mkdir()
    (root / "runs" / "other-run" / "keep.pt").write_text("keep")
    (root / "data").mkdir()
    (root / "data" / "keep.csv").write_text("keep")
    (root / "train.py").write_text("print('no tracker')\n")
    return root


def clean(repo: Path, env: dict[str, str | None], *args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["clean", RUN, "--repo-dir", str(repo), *args], env=env)


def _all_files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def _dangerous(repo: Path) -> list[tuple[str, str, str]]:
    """(case, --run-dir, the reason phrase); built per test (some need the tmp folders)."""
    outside = repo.parent / "elsewhere" / RUN
    outside.mkdir(parents=True)
    (outside / "precious.txt").write_text("keep")
    (repo / "runs" / "linked").mkdir()
    (repo / "runs" / "linked" / RUN).symlink_to(outside)
    return [
        ("filesystem root", "/", "filesystem root"),
        ("home by tilde", "~", "home folder ('~')"),
        ("home by tilde, inside", f"~/runs/{RUN}", "home folder ('~')"),
        ("root's home", "/root", "home folder"),
        ("a user's home", "/home/someone", "home folder"),
        ("dot-dot", f"runs/{RUN}/../..", "contains '..'"),
        ("dot-dot to a sibling", f"runs/../runs/{RUN}", "contains '..'"),
        ("top level", "/etc", "top-level"),
        ("all runs", "runs", "no part of its path is named"),
        ("the repository", ".", "no part of its path is named"),
        ("a data folder", "data", "no part of its path is named"),
        ("a symlink leading out", f"runs/linked/{RUN}", "symlink"),
    ]


def test_dangerous_run_dirs_are_refused_and_nothing_is_deleted(
    repo: Path, env: dict[str, str | None], tmp_path: Path
) -> None:
    cases = _dangerous(repo)
    before = _all_files(tmp_path)
    for case, run_dir, phrase in cases:
        result = clean(repo, env, "--run-dir", run_dir, "--yes")
        assert result.exit_code == 2, (case, result.output)
        lines = [ln for ln in result.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("colabq: Refusing"), (case, lines)
        assert phrase in lines[0], (case, lines[0])
    assert _all_files(tmp_path) == before


def test_a_symlinked_run_folder_by_convention_is_refused(
    repo: Path, env: dict[str, str | None], tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere" / "precious"
    outside.mkdir(parents=True)
    (outside / "data.bin").write_text("keep")
    real = repo / "runs" / RUN
    (real / "checkpoints" / "last.pt").unlink()
    (real / "checkpoints").rmdir()
    real.rmdir()
    real.symlink_to(outside)
    result = clean(repo, env, "--yes")
    assert result.exit_code == 2
    assert f"Refusing to clean up 'runs/{RUN}': it is a symlink" in result.output
    assert (outside / "data.bin").exists()


def test_a_folder_holding_the_repository_is_refused(
    env: dict[str, str | None], tmp_path: Path
) -> None:
    holder = tmp_path / RUN
    (holder / "repo").mkdir(parents=True)
    (holder / "repo" / "train.py").write_text("print()\n")
    result = clean(holder / "repo", env, "--run-dir", str(holder), "--yes")
    assert result.exit_code == 2
    assert "holds the training repository" in result.output
    assert (holder / "repo" / "train.py").exists()


def test_the_run_folder_is_shown_in_a_dry_run_and_deleted_only_with_yes(
    repo: Path, env: dict[str, str | None], ledger: Ledger
) -> None:
    dry = clean(repo, env)
    assert dry.exit_code == 0, dry.output
    assert f"would delete the run folder {repo / 'runs' / RUN}" in dry.output
    assert "Dry run: nothing was changed" in dry.output
    assert (repo / "runs" / RUN / "checkpoints" / "last.pt").exists()

    done = clean(repo, env, "--yes")
    assert done.exit_code == 0, done.output
    assert "1. local checkpoint folder: verified" in done.output
    assert not (repo / "runs" / RUN).exists()
    assert (repo / "runs" / "other-run" / "keep.pt").exists()
    assert (repo / "data" / "keep.csv").exists()


def test_an_explicit_run_dir_is_used_instead_of_the_convention(
    repo: Path, env: dict[str, str | None], ledger: Ledger, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "scratch" / "ckpt" / RUN
    elsewhere.mkdir(parents=True)
    (elsewhere / "step-100.pt").write_text("w")
    result = clean(repo, env, "--run-dir", str(elsewhere), "--yes")
    assert result.exit_code == 0, result.output
    assert not elsewhere.exists()
    assert (repo / "runs" / RUN / "checkpoints" / "last.pt").exists()  # not the one named


def _job(ledger: Ledger, run: str, state: JobState, dest: ArtifactDest | None = None) -> str:
    spec = make_spec(run_name=run, prefix="runs/x", **({"artifact": dest} if dest else {}))
    job_id, _ = ledger.create(spec, exclusive=False)  # several jobs of one run, as allowed
    if state is JobState.QUEUED:
        return job_id
    assert ledger.claim(job_id, "runner-1", 60)
    ledger.transition(job_id, JobState.ALLOCATING, owner="runner-1", reason="test")
    if state is JobState.FAILED:
        ledger.transition(job_id, JobState.FAILED, owner="runner-1", reason="test")
    else:
        ledger.transition(job_id, JobState.STARTING, owner="runner-1", reason="test")
        ledger.transition(job_id, JobState.RUNNING, owner="runner-1", reason="test")
    return job_id


def test_queued_jobs_of_the_run_are_cancelled_and_running_ones_asked_to_stop(
    repo: Path, env: dict[str, str | None], ledger: Ledger
) -> None:
    queued = _job(ledger, RUN, JobState.QUEUED)
    running = _job(ledger, RUN, JobState.RUNNING)
    failed = _job(ledger, RUN, JobState.FAILED)
    other = _job(ledger, "another-run-bs64", JobState.QUEUED)

    dry = clean(repo, env)
    assert f"would request cancel of job {queued} (QUEUED)" in dry.output
    assert f"would request cancel of job {running} (RUNNING)" in dry.output
    assert failed not in dry.output and other not in dry.output
    assert ledger.get(queued).state is JobState.QUEUED
    assert ledger.cancel_requested(running) is None

    done = clean(repo, env, "--yes")
    assert done.exit_code == 0, done.output
    assert ledger.get(queued).state is JobState.CANCELLED
    assert ledger.get(running).state is JobState.RUNNING  # its runner stops the session
    assert ledger.cancel_requested(running) == f"colabq clean {RUN}"
    assert ledger.get(failed).state is JobState.FAILED
    assert ledger.get(other).state is JobState.QUEUED
    assert ledger.cancel_requested(other) is None
    assert "4. Colab session and queued retries: verified" in done.output


def test_stored_artifacts_are_deleted_only_with_delete_remote(
    repo: Path, env: dict[str, str | None], ledger: Ledger, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    (store / RUN / "ckpt").mkdir(parents=True)
    (store / RUN / "ckpt" / "model.pt").write_text("w")
    (store / "other-run").mkdir()
    _job(ledger, RUN, JobState.FAILED, ArtifactDest(kind="local", repo=str(store), prefix=RUN))

    without = clean(repo, env, "--yes")
    assert without.exit_code == 0, without.output
    assert "2. remote artifacts: skipped — deleting stored artifacts needs its own flag" in (
        without.output
    )
    assert (store / RUN / "ckpt" / "model.pt").exists()

    with_flag = clean(repo, env, "--yes", "--delete-remote")
    assert with_flag.exit_code == 0, with_flag.output
    assert not (store / RUN).exists() and (store / "other-run").exists()


def test_hub_artifacts_without_a_token_stop_the_cleanup_with_one_line(
    repo: Path, env: dict[str, str | None], ledger: Ledger, tmp_path: Path
) -> None:
    _job(ledger, RUN, JobState.FAILED, ArtifactDest(kind="hf", repo="alice/runs", prefix=RUN))
    done = clean(repo, env, "--yes", "--delete-remote")
    assert done.exit_code == 1
    assert "Cleanup stopped at step 2" in done.output and "no Hub token" in done.output
    assert "4. Colab session" not in done.output  # nothing after it was done


def test_tensorboard_events_go_and_a_missing_tracker_library_is_skipped_not_faked(
    repo: Path, env: dict[str, str | None], ledger: Ledger
) -> None:
    events = repo / "runs" / RUN / "tb"
    events.mkdir()
    (events / "events.out.tfevents.1.host").write_text("e")
    env = {**env, "WANDB_API_KEY": "x", "WANDB_PROJECT": "coco"}
    dry = clean(repo, env, "--tracker", "tensorboard", "--tracker", "wandb")
    assert f"3. tracker run: would delete tensorboard events {events}" in dry.output
    assert "wandb: would delete the run named" in dry.output
    assert "not installed here" in dry.output

    done = clean(repo, env, "--yes", "--tracker", "tensorboard", "--tracker", "wandb")
    assert done.exit_code == 0, done.output
    # Step 1 took the events with the run folder; step 3 verifies none is left.
    assert "tensorboard: no event files under the run's folders" in done.output
    assert "Left as it was (see above): tracker run" in done.output


def test_unreachable_redis_stops_before_anything_is_deleted(
    repo: Path, env: dict[str, str | None]
) -> None:
    result = clean(repo, {**env, "COLABQ_REDIS_URL": "redis://127.0.0.1:1/0"}, "--yes")
    assert result.exit_code == 3
    assert result.output.strip().startswith("colabq: Cannot reach Redis")
    assert (repo / "runs" / RUN / "checkpoints" / "last.pt").exists()


@pytest.mark.parametrize(("run", "exit_code"), [("../etc", 2), ("a b", 2), (".hidden", 2)])
def test_a_run_name_that_is_not_one_is_refused(
    repo: Path, env: dict[str, str | None], run: str, exit_code: int
) -> None:
    result = runner.invoke(app, ["clean", run, "--repo-dir", str(repo), "--yes"], env=env)
    assert result.exit_code == exit_code
    assert "is not a run name" in result.output
