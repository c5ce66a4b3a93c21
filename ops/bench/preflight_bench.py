"""Benchmark: the config-diff check's discovery + diff versus the shell it replaces.

Builds a temporary repository with 5,000 config files under configs/, recipes/ and
experiments/ (YAML/JSON/TOML, depth ≤ 3, mtimes spread over 60 days so some are older than the
30-day window), then times, against `find configs recipes experiments -maxdepth 3 -mtime -30
\\( -name '*.yaml' … \\)` followed by `diff -u ref new` (each run as a subprocess):
1. `run_preflight` in this process (the other four checks given trivial inputs);
2. the real command, `colabq preflight --json` of this venv, as a subprocess (start-up included),
   beside `colabq --help` (start-up alone) and, when the command misses, the heaviest imports on
   its path (`python -X importtime -c "import producer.cli"`).
Prints the median seconds of each and the ratios. Target: < 0.5 s and ≤ 1.5x the shell.
Always exits 0 (it reports; it does not gate).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from producer.preflight import (
    PreflightOptions,
    RemoteState,
    RemoteStatus,
    run_preflight,
)
from producer.preflight.discovery import find_config_candidates

FILES = 5000
REPETITIONS = 9
# The real clock: `find -mtime` measures age from it, so both sides must agree on "now".
NOW = datetime.now(UTC)
FAMILIES = [f"family{i:02d}" for i in range(40)]
ROOTS = ("configs", "recipes", "experiments")
TARGET_S = 0.5
TARGET_RATIO = 1.5


def _text(suffix: str, rng: random.Random, i: int) -> str:
    data = {
        "seed": 1,
        "epochs": rng.randint(1, 90),
        "model": {"name": "resnet50", "depth": 50},
        "optimizer": {"lr": 0.1, "weight_decay": 1e-4},
        "run": i,
    }
    if suffix == ".json":
        return json.dumps(data, indent=2)
    if suffix == ".toml":
        return (
            f'seed = 1\nepochs = {data["epochs"]}\nrun = {i}\n[model]\nname = "resnet50"\n'
            "depth = 50\n[optimizer]\nlr = 0.1\nweight_decay = 1e-4\n"
        )
    return (
        f"seed: 1\nepochs: {data['epochs']}\nrun: {i}\nmodel:\n  name: resnet50\n  depth: 50\n"
        "optimizer:\n  lr: 0.1\n  weight_decay: 1.0e-4\n"
    )


def build_repo(root: Path) -> tuple[Path, Path]:
    rng = random.Random(20260601)
    for i in range(FILES):
        top = ROOTS[i % 3]
        depth = 1 + i % 3  # the file's depth below its root: 1, 2 or 3
        family = FAMILIES[i % len(FAMILIES)]
        parts = [top, family, f"sub{i % 7}"][:depth]
        suffix = (".yaml", ".yml", ".json", ".toml")[i % 4]
        path = root.joinpath(*parts, f"{family}_cfg{i:05d}{suffix}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_text(suffix, rng, i))
        age_s = rng.uniform(0.5, 60.0) * 86400  # about half older than 30 days
        stamp = (NOW - timedelta(seconds=age_s)).timestamp()
        os.utime(path, (stamp, stamp))
    family_dir = root / "configs" / "resnet"
    family_dir.mkdir(parents=True)
    ref = family_dir / "resnet50_baseline.yaml"
    base = _text(".yaml", random.Random(1), 0)
    ref.write_text(base)
    stamp = (NOW - timedelta(days=1)).timestamp()
    os.utime(ref, (stamp, stamp))
    intended = family_dir / "resnet50_bs512.yaml"
    intended.write_text(base.replace("lr: 0.1", "lr: 0.2"))
    os.utime(intended, (NOW.timestamp(), NOW.timestamp()))
    return ref, intended


class _Exists:
    def check(self, uri: str) -> RemoteStatus:
        return RemoteStatus(RemoteState.EXISTS, "fake")


def time_python(repo: Path, intended: Path) -> tuple[float, str]:
    opts = PreflightOptions(
        repo=repo,
        config=intended,
        run_name="imagenet-resnet50-bs512-lr0.2",
        seconds_per_epoch=60.0,
        zone=ZoneInfo("UTC"),
        launch_script=None,
    )
    env = {"WANDB_API_KEY": "x", "WANDB_PROJECT": "bench", "WANDB_RUN_GROUP": "g"}
    started = time.perf_counter()
    report = run_preflight(opts, now=NOW, env=env, remote_checker=_Exists())
    elapsed = time.perf_counter() - started
    return elapsed, report.finding("config-diff").saw


def time_shell(repo: Path, ref: Path, intended: Path) -> tuple[float, int]:
    find = ["find", *ROOTS, "-maxdepth", "3", "-mtime", "-30", "("]
    find += ["-name", "*.yaml", "-o", "-name", "*.yml", "-o", "-name", "*.json", "-o"]
    find += ["-name", "*.toml", ")"]
    started = time.perf_counter()
    listed = subprocess.run(find, cwd=repo, capture_output=True, text=True, check=False)
    subprocess.run(["diff", "-u", str(ref), str(intended)], capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    return elapsed, len(listed.stdout.splitlines())


def colabq_executable() -> str | None:
    beside = Path(sys.executable).parent / "colabq"  # the venv's console script
    return str(beside) if beside.is_file() else shutil.which("colabq")


def command_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "COLABQ_QUIET_WINDOWS"}
    env.update({"WANDB_API_KEY": "x", "WANDB_PROJECT": "bench", "WANDB_RUN_GROUP": "g"})
    return env


def time_command(argv: list[str], repo: Path) -> tuple[float, int]:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=repo, env=command_env(), capture_output=True, check=False)
    return time.perf_counter() - started, done.returncode


def preflight_argv(colabq: str, repo: Path, intended: Path) -> list[str]:
    options = ["--repo-dir", str(repo), "--config", str(intended), "--json"]
    options += ["--name", "imagenet-resnet50-bs512-lr0.2", "--seconds-per-epoch", "60"]
    return [colabq, "preflight", *options]


# The same command without `producer/cli.py` in front of it: what it costs once cli.py imports
# Celery, Redis and the ledger lazily (inside the commands that use them).
ALONE = "import typer; from producer.preflight_cli import preflight; typer.run(preflight)"


def heaviest_imports(count: int = 6) -> list[str]:
    """The modules imported by `producer.cli` that take longest, cumulative, top level first."""
    code = "import producer.cli"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True, text=True, check=False, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    rows = []
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            name = parts[2].rstrip()
            depth = (len(name) - len(name.lstrip()) - 1) // 2
            rows.append((int(parts[1]), depth, name.strip()))
    top = sorted((r for r in rows if r[1] == 1), reverse=True)[:count]  # what cli.py imports
    return [f"{us / 1e6:.3f} s  {name}" for us, _, name in top]


def compare_command(repo: Path, ref: Path, intended: Path) -> None:
    colabq = colabq_executable()
    if colabq is None:
        print("colabq command: not installed in this environment; skipped")
        return
    argv = preflight_argv(colabq, repo, intended)
    _, code = time_command(argv, repo)  # warm-up
    alone = [sys.executable, "-c", ALONE, *argv[2:]]
    cmd_runs, help_runs, alone_runs, sh_runs = [], [], [], []
    for _ in range(REPETITIONS):
        cmd_runs.append(time_command(argv, repo)[0])
        help_runs.append(time_command([colabq, "--help"], repo)[0])
        alone_runs.append(time_command(alone, repo)[0])
        sh_runs.append(time_shell(repo, ref, intended)[0])
    cmd, startup, solo, sh = (
        statistics.median(r) for r in (cmd_runs, help_runs, alone_runs, sh_runs)
    )
    print(f"colabq preflight (subprocess, exit {code}): median {cmd:.4f} s over {REPETITIONS} runs")
    print(f"  colabq --help (start-up alone):       median {startup:.4f} s")
    print(f"  the command without cli.py in front:  median {solo:.4f} s")
    print(f"shell find + diff -u (same rounds):     median {sh:.4f} s")
    print(f"ratio command/shell: {cmd / sh:.2f}x (without cli.py: {solo / sh:.2f}x)")
    met = cmd < TARGET_S and cmd / sh <= TARGET_RATIO
    verdict = "met" if met else "MISSED"
    print(f"target for the command (< {TARGET_S} s and <= {TARGET_RATIO}x): {verdict}")
    if not met:
        print("heaviest imports on the command's path (python -X importtime, cumulative):")
        for row in heaviest_imports():
            print(f"  {row}")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="colabq-preflight-bench-") as tmp:
        repo = Path(tmp)
        ref, intended = build_repo(repo)
        # One untimed round each, so both read from a warm page cache.
        _, saw = time_python(repo, intended)
        _, listed = time_shell(repo, ref, intended)
        py_runs, sh_runs = [], []
        for _ in range(REPETITIONS):
            py_runs.append(time_python(repo, intended)[0])
            sh_runs.append(time_shell(repo, ref, intended)[0])
        py, sh = statistics.median(py_runs), statistics.median(sh_runs)
        ratio = py / sh
        ours = len(find_config_candidates(repo, now=datetime.now(UTC)))
        print(
            f"repository: {FILES + 2} config files; within 30 days: find lists {listed}, "
            f"colabq finds {ours}"
        )
        print(f"config-diff: {saw}")
        print(f"python run_preflight (5 checks): median {py:.4f} s over {REPETITIONS} runs")
        print(f"shell find + diff -u:            median {sh:.4f} s over {REPETITIONS} runs")
        print(f"ratio python/shell: {ratio:.2f}x")
        met = py < TARGET_S and ratio <= TARGET_RATIO
        verdict = "met" if met else "MISSED"
        print(f"target (< {TARGET_S} s and <= {TARGET_RATIO}x the shell): {verdict}")
        compare_command(repo, ref, intended)
    return 0


if __name__ == "__main__":
    sys.exit(main())
