"""The example training repository (examples/training-repo), run as a user would run it.

The real `colabq preflight` (a subprocess) passes all five checks on a copy of it, and fails
config-diff when the learning rate is left unscaled; its `job.sh` trains under bash in seconds,
writing checkpoints and results.json into the folder it runs in, and resumes from a checkpoint;
started the way the VM starts it (colabq's copy of the script, in the repository's folder) it
runs the repository's code and names the commit, from git or from a snapshot's .colabq-commit;
its uv.lock is current.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

from ops.uvproject import write_wheel
from producer.preflight.report import CHECK_NAMES

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "training-repo"
RUN_NAME = "synthetic-linreg-sgd-bs64-lr1e-1"
PREFLIGHT_ARGS = (
    "--config",
    "configs/run.yaml",
    "--reference",
    "configs/reference.yaml",
    "--launch-script",
    "job.sh",
    "--name",
    RUN_NAME,
    "--seconds-per-epoch",
    "0.01",
    "--wall",
    "30m",
)
TINY = """\
seed: 3
data:
  train_file: data/train.csv
batch_size: 64
optimizer:
  lr: 0.1
epochs: {epochs}
"""
# The developer's shell must not decide what the checks see (a tracker, quiet windows) or what
# job.sh does (its settings, a resume point).
_DROPPED = ("WANDB_", "NEPTUNE_", "MLFLOW_", "HF_TOKEN", "COLABQ_QUIET_WINDOWS", "COLABQ_RESUME")
_JOB_SETTINGS = ("CONFIG", "LR", "SEED", "PYTHON")


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(_DROPPED) and k not in _JOB_SETTINGS
    }
    env["PYTHONPATH"] = str(ROOT)
    # uv checks the example's lock without the network (`uv lock --check`).
    return {**env, "COLUMNS": "200", "UV_OFFLINE": "1", **extra}


def _copy(tmp_path: Path) -> Path:
    repo = tmp_path / "training-repo"
    ignored = shutil.ignore_patterns("checkpoints", "results.json", "store", "mlruns", ".venv")
    shutil.copytree(EXAMPLE, repo, ignore=ignored)
    return repo


def _commit(top: Path) -> str:
    """`top` as a git repository with everything in it committed; its HEAD."""
    git = ("git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-C", str(top))
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "example"], check=True)
    return subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def _preflight(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "producer.cli", "preflight", "--repo-dir", str(repo), *args]
    return subprocess.run(
        argv, cwd=repo.parent, env=_env(), capture_output=True, text=True, timeout=120
    )


def _job(work: Path, script: Path, **env: str) -> subprocess.CompletedProcess[str]:
    work.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        ["bash", str(script)],
        cwd=work,
        env=_env(PYTHON=sys.executable, **env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_example_passes_every_check(tmp_path: Path) -> None:
    repo = _copy(tmp_path / "top")  # a subfolder of a repository, as in colabq's
    _commit(tmp_path / "top")
    result = _preflight(repo, *PREFLIGHT_ARGS, "--code", "snapshot", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    verdicts = {f["check"]: f["verdict"] for f in report["findings"]}
    assert verdicts == dict.fromkeys(CHECK_NAMES, "pass"), report["findings"]
    found = {f["check"]: f for f in report["findings"]}
    assert "the job starts in training-repo/ of the repository" in found["code"]["details"]
    assert found["environment"]["saw"].startswith("uv.lock is current")
    diff = "\n".join(report["findings"][0]["details"])
    assert "[note] effective batch 32 → 64 (x2), lr 0.05 → 0.1" in diff
    assert "follows it (the linear rule)" in diff
    monitoring = report["findings"][3]["saw"]
    assert "experiment synthetic-linreg" in monitoring and "tags cohort" in monitoring
    assert report["submit_command"].startswith("colabq submit ")
    assert "job.sh" in report["submit_command"]


def test_an_unscaled_learning_rate_fails_config_diff(tmp_path: Path) -> None:
    repo = _copy(tmp_path)
    run = repo / "configs" / "run.yaml"
    text = run.read_text()
    assert "lr: 0.1  # why:" in text
    run.write_text(text.replace("lr: 0.1  # why:", "lr: 0.05  # note:"))
    result = _preflight(repo, *PREFLIGHT_ARGS, "--json")
    assert result.returncode == 2, result.stdout + result.stderr
    diff = json.loads(result.stdout)["findings"][0]
    assert diff["verdict"] == "fail"
    assert any(
        "effective batch 32 → 64 (x2) but lr stayed 0.05" in d
        and "the linear scaling rule gives lr = 0.1" in d
        for d in diff["details"]
    ), diff["details"]


def test_job_sh_trains_a_tiny_config_in_seconds(tmp_path: Path) -> None:
    repo = _copy(tmp_path)
    (repo / "configs" / "tiny.yaml").write_text(TINY.format(epochs=3))
    work = tmp_path / "job"
    started = time.monotonic()
    result = _job(work, repo / "job.sh", CONFIG="configs/tiny.yaml")
    elapsed_s = time.monotonic() - started
    assert result.returncode == 0, result.stdout + result.stderr
    assert elapsed_s < 20
    assert "epoch 3/3" in result.stdout and "[job]" in result.stdout
    last = json.loads((work / "checkpoints" / "last.json").read_text())
    assert last["epoch"] == 3
    assert sorted(p.name for p in (work / "checkpoints").glob("epoch-*.json")) == [
        "epoch-001.json",
        "epoch-002.json",
        "epoch-003.json",
    ]
    results = json.loads((work / "results.json").read_text())
    assert results["epochs"] == 3 and results["final_loss"] == last["loss"]
    assert results["final_loss"] < 0.5  # y = 3x1 - 2x2 + 0.5x3 + 1 has variance ~14
    assert results["seconds_per_epoch"] > 0
    assert not (repo / "checkpoints").exists()  # outputs land where the job runs, not in the code

    (repo / "configs" / "tiny.yaml").write_text(TINY.format(epochs=5))
    resumed = _job(
        tmp_path / "segment-2",
        repo / "job.sh",
        CONFIG="configs/tiny.yaml",
        COLABQ_RESUME_FROM=str(work / "checkpoints"),
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "after epoch 3" in resumed.stdout and "epoch 4/5" in resumed.stdout
    assert "epoch 1/5" not in resumed.stdout
    done = json.loads((tmp_path / "segment-2" / "checkpoints" / "last.json").read_text())
    assert done["epoch"] == 5


def test_job_sh_as_the_vm_starts_it_runs_the_repository_s_commit(tmp_path: Path) -> None:
    shipped = tmp_path / "content" / "job.sh"  # colabq's copy of the script, outside the code
    shipped.parent.mkdir()
    shutil.copy(EXAMPLE / "job.sh", shipped)
    alone = _job(tmp_path / "no-code", shipped)
    assert alone.returncode == 2
    assert "code: git" in alone.stderr and "code: snapshot" in alone.stderr
    assert not (tmp_path / "no-code" / "checkpoints").exists()

    top = tmp_path / "repo"  # the example as a subfolder of a bigger repository
    repo = _copy(top)
    (repo / "configs" / "tiny.yaml").write_text(TINY.format(epochs=2))
    (top / ".colabq-commit").write_text("a" * 40 + "\n")  # what a snapshot's archive carries
    snapshot = _job(repo, shipped, CONFIG="configs/tiny.yaml")
    assert snapshot.returncode == 0, snapshot.stdout + snapshot.stderr
    assert f"commit {'a' * 40} (snapshot)" in snapshot.stdout
    assert (repo / "checkpoints" / "epoch-002.json").exists()  # where colabq syncs from

    (top / ".colabq-commit").unlink()
    head = _commit(top)
    checkout = _job(repo, shipped, CONFIG="configs/tiny.yaml")
    assert checkout.returncode == 0, checkout.stdout + checkout.stderr
    assert f"commit {head} (git checkout)" in checkout.stdout


def test_the_example_is_a_uv_project_with_a_current_lock(tmp_path: Path) -> None:
    repo = _copy(tmp_path)
    pyproject = (repo / "pyproject.toml").read_text()
    assert 'dependencies = ["PyYAML' in pyproject and "package = false" in pyproject
    assert (repo / ".python-version").read_text().strip() == "3.11"
    uv = Path(sys.executable).parent / "uv"
    # Offline, a changed requirement is resolved again before uv can call the lock stale: a
    # stand-in PyYAML wheel of the locked version (ops/uvproject.py's writer) and a cache of this
    # test's own, so the answer does not hang on what the machine's uv cache happens to hold.
    wheels = tmp_path / "wheels"
    write_wheel(wheels, "PyYAML", _locked_version(repo, "pyyaml"), {"yaml/__init__.py": ""})
    argv = [str(uv), "lock", "--check", "--offline", "--find-links", str(wheels)]
    env = _env(UV_CACHE_DIR=str(tmp_path / "uv-cache"))
    check = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    (repo / "pyproject.toml").write_text(pyproject.replace('"PyYAML>=6.0"', '"PyYAML>=6.0.1"'))
    stale = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    assert stale.returncode != 0  # the check can fail: a changed requirement is a stale lock
    assert "needs to be updated" in stale.stderr, stale.stderr


def _locked_version(repo: Path, name: str) -> str:
    lock = tomllib.loads((repo / "uv.lock").read_text())
    return next(str(p["version"]) for p in lock["package"] if p["name"] == name)
