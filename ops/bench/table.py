"""`make bench`: every benchmark, then one table (figure, colabq, anchor, ratio, target, verdict).

Each script runs in its own process (`python ops/bench/X.py --runs N`), its figures collected
through `$COLABQ_BENCH_JSON`; a script that fails is a row that says so. Exit 1 if any target is
not met or any script failed.

    .venv/bin/python ops/bench/table.py [--runs 3] [--only idle_bench,status_bench]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
from ops.bench.figures import JSON_ENV, MIN_RUNS, Figure, load, spread  # noqa: E402

# In the order of the table; each prints its own detail first.
BENCHES = (
    "idle_bench",  # P1
    "loss_bench",  # P2
    "submit_bench",  # P3
    "dispatch_bench",  # P4
    "preflight_bench",  # P5
    "status_bench",  # P6
    "janitor_bench",  # P7
    "memory_bench",  # P8, per-session RSS; Redis memory per job
    "logs_bench",  # P9; Redis memory per 100k log lines
    "uvstart_bench",  # P10: a uv project's code and environment, before its first line
    "sweep_bench",  # a 1,000-job sweep as a command
    "hub_upload_bench",  # a checkpoint to the Hub, against `hf upload`
    "drain_bench",  # F1, F2: a broken host drained, no job lost to it
    "metrics_bench",  # P11: a `/metrics` scrape at 10k jobs, its round trips and commands
    "reconcile_bench",  # P12: the janitor's walk over the job records, 100k jobs
    "quota_bench",  # Q1: what user and account quotas add to a claim
)


def run(name: str, runs: int, out: Path) -> tuple[int, float]:
    t0 = time.monotonic()
    print(f"== {name}", flush=True)
    env = {**os.environ, JSON_ENV: str(out)}
    rc = subprocess.call([sys.executable, str(HERE / f"{name}.py"), "--runs", str(runs)], env=env)
    return rc, time.monotonic() - t0


def render(figures: list[Figure], failed: list[str]) -> str:
    head = ("figure", "colabq", "anchor (same run)", "ratio", "target", "verdict")
    rows = [head]
    for f in figures:
        anchor = f"{spread(f.anchor, f.unit)} {f.anchor_name}" if f.anchor else "-"
        ratio = f"{f.ratio:.2f}x" if f.ratio is not None else "-"
        rows.append(
            (f"{f.key} {f.name}", spread(f.colabq, f.unit), anchor, ratio, f.target,
             "met" if f.met else "NOT met")
        )  # fmt: skip
    rows += [(name, "failed", "-", "-", "-", "NOT met") for name in failed]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=MIN_RUNS)
    ap.add_argument("--only", default="", help="comma-separated benchmark names")
    args = ap.parse_args()
    only = [n for n in args.only.split(",") if n]
    unknown = [n for n in only if n not in BENCHES]
    if unknown:
        raise SystemExit(f"--only: unknown benchmark {unknown[0]!r}; one of {', '.join(BENCHES)}")
    if args.runs < MIN_RUNS:
        raise SystemExit(f"--runs: {MIN_RUNS} or more (a median with its range)")
    failed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="colabq-bench-") as tmp:
        out = Path(tmp) / "figures.jsonl"
        out.touch()
        for name in only or BENCHES:
            before = len(load(str(out)))
            rc, took = run(name, args.runs, out)
            got = len(load(str(out))) - before
            print(f"== {name}: exit {rc}, {got} figures, {took:.0f} s\n", flush=True)
            if got == 0:
                failed.append(name)
        figures = load(str(out))
    load_avg = os.getloadavg()[0]
    print(f"colabq benchmarks: medians of {args.runs} runs (min-max); "
          f"{os.cpu_count()} CPUs, load {load_avg:.1f} at the end")  # fmt: skip
    print(render(figures, failed))
    notes = [f"{f.key}: {f.note}" for f in figures if f.note]
    if notes:
        print("\n".join(["", *notes]))
    ok = not failed and all(f.met for f in figures)
    print(f"\n{'all targets met' if ok else 'NOT all targets met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
