"""P10: billed GPU-seconds from assignment to a uv project's first line, and after its last.

A small uv project (`ops/uvproject.py`: a git repository whose lock resolves offline from its own
`wheels/`) goes the way a user's does: `colabq submit --repo-dir PROJECT --code snapshot|git` ->
a real Celery worker -> the Colab emulator -> a local store. On the VM colabq unpacks the staged
archive (snapshot) or fetches the commit from the project's bare remote (git), runs `uv sync
--frozen`, checks the environment, and starts the job under `uv run --no-sync`. For each job,
from the emulator's billing record of its VM and the job script's own clock:
  before = T0 - assigned_at      (allocation, upload, start, the code and its environment)
  after  = unassigned_at - T1    (the end, the final sync, the stop)
The anchor is the same work done by hand, as every user wrote it before colabq shipped code: a
job that ships nothing and whose script fetches the same commit (`git fetch --depth 1`), runs
`uv sync --frozen` and then the same lines under `uv run --no-sync`, measured the same way in
the same run. Target: colabq's path within a second of the hand-written one.

    .venv/bin/python ops/bench/uvstart_bench.py [--runs 3] [--redis-url redis://127.0.0.1:6379/11]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from ops.bench.figures import Figure, check_runs, emit  # noqa: E402
from ops.bench.idle_bench import billing_record, colabq, wait_terminal  # noqa: E402
from ops.bench.rig import DEFAULT_REDIS_URL, fleet_env, start_worker, tear_down  # noqa: E402
from ops.uvproject import UvProject, build_uv_project, offline_env  # noqa: E402

# The job's own lines: its first and last print the clock; between them the project's code runs
# in the project's environment (train.py imports the project's torch).
JOB = (
    "python -c 'import time; print(\"BENCH_T0=%f\" % time.time())'\n"
    "python train.py\n"
    "sleep 1\n"
    "python -c 'import time; print(\"BENCH_T1=%f\" % time.time())'\n"
)
# The anchor: the clone-and-install preamble a user wrote by hand, then the same lines.
BY_HAND = """\
set -euo pipefail
git init -q repo && cd repo
cat > job-lines.sh <<'JOB'
{job}JOB
# The emulator's remote is a folder of another user (a VM fetches a URL): git's ownership
# check (in the local upload-pack too: only global config reaches it) would refuse it.
git config --global --add safe.directory '*'  # the job user's own ~/.gitconfig
git fetch -q --depth 1 {remote} {commit} && git checkout -q --detach FETCH_HEAD
uv sync --frozen --quiet
exec uv run --no-sync bash job-lines.sh
"""
MODES = ("snapshot", "git", "by hand")
TARGET_S = 1.0  # colabq's path at most this much above the hand-written one


def submit(
    env: dict[str, str], root: Path, project: UvProject, mode: str, i: int
) -> tuple[str, str]:
    """(the job's id, its run name)."""
    run = f"bench-uvstart-{mode.replace(' ', '')}-{i}"
    args = ["--name", run, "--wall", "10m", "--local-store", str(root / "store"), "--json",
            "--waive", "config-diff", "--waive", "paths", "--waive", "monitoring"]  # fmt: skip
    if mode == "by hand":
        script = root / f"by-hand-{i}.sh"
        script.write_text(BY_HAND.format(job=JOB, remote=project.remote_url, commit=project.commit))
    else:
        script = root / "job.sh"
        script.write_text(JOB)
        args += ["--repo-dir", str(project.root), "--code", mode]
    out = colabq(env, "submit", str(script), *args)
    return str(json.loads(out)["jobs"][0]["job_id"]), run


def one_job(
    env: dict[str, str], root: Path, project: UvProject, mode: str, i: int
) -> tuple[float, float]:
    """(billed seconds before the job's first line, after its last) of one job."""
    job_id, run = submit(env, root, project, mode, i)
    rec = wait_terminal(env, job_id)
    log = (root / "store" / run / "logs" / job_id / "job.log").read_text()
    if rec.get("state") != "succeeded":
        raise SystemExit(f"bench job {job_id} ({mode}) ended {rec.get('state')}: "
                         f"{rec.get('reason')}\n{log[-2000:]}")  # fmt: skip
    if "torch: 2.5.0" not in log:
        raise SystemExit(f"bench job {job_id} ({mode}) did not run the project's code:\n{log}")
    t0 = float(re.search(r"BENCH_T0=([0-9.]+)", log)[1])  # type: ignore[index]
    t1 = float(re.search(r"BENCH_T1=([0-9.]+)", log)[1])  # type: ignore[index]
    endpoint = str(
        rec.get("endpoint") or json.loads(str(rec.get("report") or "{}")).get("endpoint")
    )
    assigned, unassigned = billing_record(Path(env["COLAB_EMU_HOME"]), endpoint)
    return t0 - assigned, unassigned - t1


def measure(env: dict[str, str], root: Path, runs: int) -> dict[str, tuple[list[float], ...]]:
    """Each mode's (before, after) samples; the modes take turns, so load hits them alike."""
    project = build_uv_project(root / "project")
    worker = start_worker(env, root / "worker.log")
    got: dict[str, tuple[list[float], ...]] = {m: ([], []) for m in MODES}
    try:
        for i in range(runs):
            for mode in MODES:
                b, e = one_job(env, root, project, mode, i)
                got[mode][0].append(b)
                got[mode][1].append(e)
                print(f"run {i + 1}, {mode}: {b:.3f} s before its first line, "
                      f"{e:.3f} s after its last")  # fmt: skip
    finally:
        tear_down(env, root, worker)
    return got


def figure(key: str, what: str, samples: list[float], anchor: list[float], note: str) -> Figure:
    met = statistics.median(samples) <= statistics.median(anchor) + TARGET_S
    return Figure(
        key, f"uv project, {what}", "s", samples, anchor, "fetch + uv sync by hand in the job",
        f"<= anchor + {TARGET_S:g} s", met, note=note,
    )  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="jobs of each kind (>= 3)")
    ap.add_argument("--redis-url", default=DEFAULT_REDIS_URL)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="colabq-uvstart-bench-"))
    # The job runs as an unprivileged user on the VM (as root, the wrapper drops to one): the
    # hand-written anchor's fetch must reach the project's remote as a VM reaches a public one.
    root.chmod(0o755)
    # uv never reaches the network, here (`uv lock --check`) nor on the emulated VM.
    got = measure({**fleet_env(root, args.redis_url), **_uv_offline()}, root, check_runs(args.runs))
    (snap, snap_after), (git, git_after), (hand, hand_after) = (got[m] for m in MODES)
    emit([
        figure("P10a", "code: snapshot: billed s to its first line", snap, hand,
               "assignment to the job's first line: allocation, upload, start, the archive "
               "downloaded and unpacked, uv sync --frozen, the environment's check"),
        figure("P10b", "code: git: billed s to its first line", git, hand,
               "the same with the commit fetched from the project's remote (a bare "
               "repository, file://)"),
        figure("P10c", "billed s after its last line", snap_after + git_after, hand_after,
               "the job's last line to unassignment (the end, the final sync, the stop); "
               "both modes' jobs"),
    ])  # fmt: skip
    return 0


def _uv_offline() -> dict[str, str]:
    names = ("UV_OFFLINE", "UV_PYTHON_DOWNLOADS", "UV_NO_CACHE")
    return {k: v for k, v in offline_env().items() if k in names}


if __name__ == "__main__":
    sys.exit(main())
