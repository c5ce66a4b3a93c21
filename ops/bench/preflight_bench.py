"""P5: `colabq preflight` as a command on a repository of 5,000 config files, against the shell
it replaces, in the same run.

Builds a temporary repository with 5,000 config files under configs/, recipes/ and
experiments/ (YAML/JSON/TOML, depth <= 3, mtimes spread over 60 days so some are older than the
30-day window), then, after one untimed round, times --runs rounds of:
- colabq: `colabq preflight --json` of an install without development extras
  (`rig.runtime_python`) as a new process, as a user types it (start-up
  included; the run's config changes a risky key, so the report fails: exit 2);
- the anchor: `find configs recipes experiments -maxdepth 3 -mtime -30 \\( -name '*.yaml' … \\)`
  then `diff -u ref new`, each a subprocess;
and, printed beside them: the five checks in this process (`run_preflight`), `colabq --help`
(start-up, every command listed), the command in this shell's own environment (where
PYTHONDONTWRITEBYTECODE, if set, makes every start compile colabq's modules again), and what
the command's imports cost by package (`python -X importtime`), which the figure's note names.

The commands run with a bytecode cache of their own (PYTHONPYCACHEPREFIX in a temporary folder,
filled by the untimed round), as an installed colabq runs. Target: median <= 0.25 s. Exits 0
whether or not the target is met; non-zero only when it could not measure.

    .venv/bin/python ops/bench/preflight_bench.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ops.bench.figures import Figure, check_runs, emit  # noqa: E402
from ops.bench.rig import runtime_python  # noqa: E402
from producer.preflight import (  # noqa: E402
    PreflightOptions,
    RemoteState,
    RemoteStatus,
    run_preflight,
)
from producer.preflight.discovery import find_config_candidates  # noqa: E402

FILES = 5000
# The real clock: `find -mtime` measures age from it, so both sides must agree on "now".
NOW = datetime.now(UTC)
FAMILIES = [f"family{i:02d}" for i in range(40)]
ROOTS = ("configs", "recipes", "experiments")
TARGET_S = 0.25
RUN_NAME = "imagenet-resnet50-bs512-lr0.2"
TRACKER_ENV = {"WANDB_API_KEY": "x", "WANDB_PROJECT": "bench", "WANDB_RUN_GROUP": "g"}


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
        run_name=RUN_NAME,
        seconds_per_epoch=60.0,
        zone=ZoneInfo("UTC"),
        launch_script=None,
    )
    started = time.perf_counter()
    report = run_preflight(opts, now=NOW, env=TRACKER_ENV, remote_checker=_Exists())
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


def colabq_executable() -> str:
    """`colabq` as a user's install has it: without development extras (`rig.runtime_python`)."""
    return str(runtime_python().parent / "colabq")


def own_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment, without a quiet-windows setting (the pre-flight would then build the
    settings to read it), with `extra`."""
    env = {k: v for k, v in os.environ.items() if k.upper() != "COLABQ_QUIET_WINDOWS"}
    return {**env, **(extra or {})}


def cached_env(cache: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """`own_env(extra)` with a bytecode cache of its own in `cache` (PYTHONDONTWRITEBYTECODE
    dropped), as an installed command has one: a measure of the command, not of compiling it."""
    env = {k: v for k, v in own_env(extra).items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": str(cache)}


def time_command(argv: list[str], env: Mapping[str, str], cwd: Path, ok: tuple[int, ...]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=dict(env), capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode not in ok:
        tail = done.stderr.decode(errors="replace")[-2000:]
        raise SystemExit(f"{' '.join(argv[:3])} … exited {done.returncode}:\n{tail}")
    return elapsed


def heaviest_imports(
    argv: list[str], env: Mapping[str, str], cwd: Path, count: int = 7, python: str | None = None
) -> list[tuple[str, float]]:
    """The command's imports: seconds spent importing each top-level package's own modules
    (`-X importtime` self times, summed by package; importtime adds overhead of its own, so
    read them as shares), heaviest first, "total" first of all."""
    done = subprocess.run(
        [python or sys.executable, "-X", "importtime", *argv], cwd=cwd, env=dict(env),
        capture_output=True,
        text=True, check=False,
    )  # fmt: skip
    by_package: dict[str, float] = defaultdict(float)
    for line in done.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) != 3 or not parts[0].strip().isdigit():
            continue
        by_package[parts[2].strip().split(".")[0]] += int(parts[0]) / 1e6
    top = sorted(by_package.items(), key=lambda kv: -kv[1])[:count]
    return [("total", sum(by_package.values())), *top]


def describe(imports: list[tuple[str, float]]) -> str:
    total, rest = imports[0][1], imports[1:]
    return f"imports {total:.3f} s (-X importtime, by package): " + ", ".join(
        f"{name} {s:.3f}" for name, s in rest
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    runs = check_runs(ap.parse_args().runs)
    colabq = colabq_executable()
    with tempfile.TemporaryDirectory(prefix="colabq-preflight-bench-") as tmp:
        repo, cache = Path(tmp) / "repo", Path(tmp) / "pycache"
        repo.mkdir()
        ref, intended = build_repo(repo)
        argv = [colabq, "preflight", "--repo-dir", str(repo), "--config", str(intended),
                "--json", "--name", RUN_NAME, "--seconds-per-epoch", "60"]  # fmt: skip
        env, own = cached_env(cache, TRACKER_ENV), own_env(TRACKER_ENV)
        # One untimed round: a warm page cache for both, the bytecode cache filled.
        _, saw = time_python(repo, intended)
        _, listed = time_shell(repo, ref, intended)
        time_command(argv, env, repo, (2,))
        time_command([colabq, "--help"], env, repo, (0,))
        cmd, anchor, checks, helps, as_is = [], [], [], [], []
        for _ in range(runs):
            cmd.append(time_command(argv, env, repo, (2,)))  # a risky key changed: exit 2
            anchor.append(time_shell(repo, ref, intended)[0])
            checks.append(time_python(repo, intended)[0])
            helps.append(time_command([colabq, "--help"], env, repo, (0,)))
            as_is.append(time_command(argv, own, repo, (2,)))
        imports = heaviest_imports(argv, env, repo, python=str(runtime_python()))
        ours = len(find_config_candidates(repo, now=datetime.now(UTC)))
    med = statistics.median
    print(f"repository: {FILES + 2} config files; within 30 days: find lists {listed}, "
          f"colabq finds {ours}")  # fmt: skip
    print(f"config-diff: {saw}")
    print(f"{runs} runs each (median, min-max):")
    for name, xs in (
        ("colabq preflight --json (a new process)", cmd),
        ("anchor: find + diff -u", anchor),
        ("the five checks in this process", checks),
        ("colabq --help (start-up, every command)", helps),
        ("colabq preflight in this shell's own env", as_is),
    ):
        print(f"  {name:<42} {med(xs):.3f} s ({min(xs):.3f}-{max(xs):.3f})")
    print(f"  {describe(imports)}")
    emit([
        Figure(
            "P5", "`colabq preflight` as a command, 5,000 configs", "s", cmd, anchor,
            "find + diff -u", f"<= {TARGET_S} s", med(cmd) <= TARGET_S, note=describe(imports),
            extra={"checks_in_process_s": med(checks), "help_s": med(helps),
                   "own_env_s": med(as_is), "imports_s": imports[0][1]},
        ),
    ])  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
