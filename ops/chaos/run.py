"""The chaos suite: colabq under kill -9, host loss, Redis outages and restarts, the Hub down, CLI
faults and load, on the offline Colab emulator, with the user's own notebook session and an
unknown `[?]` assignment present throughout every group. It prints one table and exits 1 unless
every counter of every group is zero.

    make chaos                                     # everything (about 28 minutes on 2 cores)
    .venv/bin/python -m ops.chaos --quick          # the CI subset (about a minute)
    .venv/bin/python -m ops.chaos --only kill-9 --repeat 1 --jobs 20 --keep
    .venv/bin/python -m ops.chaos --matrix         # only the kill matrix (every process x phase)
    .venv/bin/python -m ops.chaos --cell "attach client@running" --cell "worker main@persisting"

The kill matrix (`ops/chaos/matrix.py`, `matrix_run.py`) SIGKILLs each host-side process (the
worker's main process, its pool child, the watchdog, the attach client, each `colab` call) at each
phase where it exists, and prints its own table: process x phase -> outcome, expected, verdict.

Groups (each its own deployment: key prefix, queues, state dirs, emulated account):
- `kill-9`: SIGKILL of the worker before claim (its pool frozen with SIGSTOP, the message
  received), during checks, during allocation, after allocation, during upload, mid-run, during
  the final sync, while persisting and while releasing, `--repeat` times each; a supervisor
  restarts it at once. A kill during allocation may end FAILED_LOST (see `KILL_POINTS`).
- `host-lost`: the worker and every watchdog and exec client of its host; nothing restarts there.
- `redis-down`: Redis stopped `--outage` s during allocation, upload, run and release.
- `redis-restart-aof`, `redis-restart-empty`: Redis restarted mid-run with its append-only file,
  and without persistence (killed, started empty).
- `redis-down-3min`: Redis stopped `--long-outage` s (180) mid-run and restarted with its data
  (the Redis groups are `ops/chaos/redis_faults.py`).
- `hub-down`: the Hub refuses the final upload (FAILED, results recovered from the kept VM).
- `cli-faults`: `colab status` 503s, stale BUSY (attach client killed), endpoint mismatch (the
  name reassigned by hand), a hung `colab exec`, preemption without and with a restart.
- `many-jobs`: `--jobs` jobs over 4 workers.
- `broken-login`, `broken-state-dir`, `capacity` (`ops/chaos/members.py`): one host's Colab
  login (a 401 for that HOME) or its state dir breaks under a healthy second host, and `colab
  new` refused (412), an accelerator refused (the `--gpu A100,L4` fallback), another GPU served.
- `launch-exec-kill`, `retained-orphan`, `token-expiry` (`ops/chaos/recovery.py`): the
  lingering launch exec SIGKILLed, a RETAINED job's host lost, proxy tokens of 6 s under jobs
  of ~30 s.
Beat's janitor (`colabq janitor --act` from another host's env, short graces) runs every few
seconds during the kill, host, Hub and CLI groups: it adopts, resends and stops orphans, and must
leave the user's assignments alone. `--quick` runs kill-9 (before claim, mid-run, release, once)
and many-jobs (8 jobs): about a minute.

The counters (per group, then the total):
- leaked sessions: assignments colabq made that are still open at the end (after the bounds).
- duplicate allocations: assignments of a job beyond its segments (1 + restarts), plus
  assignments colabq made that no job recorded.
- lost jobs: jobs missing from the ledger or not terminal a minute past their deadline.
- lost artifacts: an expected artifact of a job that finished on its VM (exit 0) neither in the
  store nor in the results recovered to the worker host that its report names.
- wrong final states: a terminal state other than the scenario's (SUCCEEDED after a kill or an
  outage, FAILED when the Hub refused the final upload, VM_LOST when preempted, ...).
- stuck jobs: not terminal by the scenario's deadline.
- foreign stops: the user's notebook session, the `[?]` assignment (or an assignment the user
  made under a colabq name) no longer assigned at the end.
- leftover processes: processes whose command line or environment names the group's folder at
  the end (exec clients, `colab exec`, watchdogs, adopters), the user's VMs excepted.
- GPU-s beyond bounds: per job, seconds its VM stayed assigned after the job's own end time
  (written by the job script) beyond the bound: 30 s (worker SIGKILLed, or none), 60 s (host).
- lost/dup lines: for a job that prints numbered lines and must show each once (the newer
  groups), each line missing from its log stream or there more than once.
- unmet checks: a group's own expectations the other counters cannot see (a broken worker shown
  drained, then undrained; a job on its fallback GPU; refusals counted; a job never RUNNING after
  its VM ended; results recovered to the adopter's host), each one that failed.
A group that crashed or could not run says so ("not run") instead of showing zeros.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from ops.chaos import matrix_run, members, recovery
from ops.chaos import redis_faults as rf
from ops.chaos import scenarios as sc
from ops.chaos.checks import HEADERS, Counters
from ops.chaos.fleet import Group
from ops.chaos.matrix import Cell, all_cells, parse_cell

REDIS_URL = os.environ.get("COLABQ_CHAOS_REDIS_URL", "redis://127.0.0.1:6379/13")
QUICK_POINTS = ["before claim", "mid-run", "release"]

Runner = Callable[[Path], sc.Outcome]


def plan(args: argparse.Namespace) -> dict[str, Runner]:
    """The groups, in order; `--quick` keeps a subset that fits CI."""
    quick = args.quick
    points = QUICK_POINTS if quick else None
    repeat = 1 if quick else args.repeat
    jobs = min(args.jobs, 8) if quick else args.jobs

    def named(name: str, body: sc.Body, env: dict[str, str] | None = None) -> Runner:
        return lambda root: sc.run_group(name, root, REDIS_URL, body, env)

    groups: dict[str, Runner] = {
        "kill-9": named("kill-9", lambda g: sc.kills(g, repeat, points)),
        "host-lost": named("host-lost", sc.host_lost),
        "redis-down": partial(_with_redis, "redis-down", True, args.outage),
        "redis-restart-aof": partial(_with_redis, "redis-restart-aof", True, 0.0),
        "redis-restart-empty": partial(_with_redis, "redis-restart-empty", False, 0.0),
        "hub-down": _hub_down,
        "cli-faults": named("cli-faults", sc.cli_faults),
        "many-jobs": named("many-jobs", lambda g: sc.many_jobs(g, jobs, 4)),
        "broken-login": named("broken-login", members.broken_login, members.MEMBERS_ENV),
        "broken-state-dir": named(
            "broken-state-dir", members.broken_state_dir, members.MEMBERS_ENV
        ),
        "capacity": named("capacity", members.capacity, members.MEMBERS_ENV),
        "launch-exec-kill": named("launch-exec-kill", recovery.launch_exec_kill),
        "retained-orphan": _retained_orphan,
        "redis-down-3min": partial(_redis_down_long, args.long_outage),
        "token-expiry": named("token-expiry", recovery.token_expiry, recovery.TOKEN_ENV),
    }
    if quick:
        groups = {k: v for k, v in groups.items() if k in ("kill-9", "many-jobs")}
    if args.only:
        unknown = set(args.only) - set(groups)
        if unknown:
            raise SystemExit(f"unknown group(s): {', '.join(sorted(unknown))}")
        groups = {k: v for k, v in groups.items() if k in args.only}
    return groups


def _with_redis(name: str, persist: bool, outage_s: float, root: Path) -> sc.Outcome:
    with rf.private_redis(root / f"{name}-redis") as r:

        def body(g: Group) -> tuple[set[str], str, list[str]]:
            if outage_s:
                return rf.redis_outages(g, r, outage_s)
            return rf.redis_restart(g, r, persist=persist)

        return sc.run_group(name, root, r.url, body)


def _redis_down_long(outage_s: float, root: Path) -> sc.Outcome:
    name = "redis-down-3min"
    with rf.private_redis(root / f"{name}-redis") as r:
        body = partial(rf.redis_down_long, r=r, outage_s=outage_s)
        return sc.run_group(name, root, r.url, body, rf.REDIS_ENV)


def _retained_orphan(root: Path) -> sc.Outcome:
    from ops.chaos.hub import hub_env

    with hub_env(root / "hub-retained") as (env, hub, has):
        body = partial(recovery.retained_orphan, hub=hub)
        env = {**env, **recovery.RETAINED_ENV}
        return sc.run_group("retained-orphan", root, REDIS_URL, body, env, artifact_in_store=has)


def _hub_down(root: Path) -> sc.Outcome:
    from ops.chaos.hub import hub_env

    with hub_env(root / "hub") as (env, hub, has):
        return sc.run_group(
            "hub-down", root, REDIS_URL, lambda g: sc.hub_down(g, hub), env, artifact_in_store=has
        )


def table(outcomes: list[sc.Outcome]) -> tuple[str, bool]:
    """One table: the counters per group and their total; ok only if all ran and are 0."""
    cols = ["group", *HEADERS, "runs"]
    total = Counters()
    rows = []
    ok = True
    for o in outcomes:
        if o.counters is None:
            ok = False
            rows.append([o.name, *(["not run"] + [""] * (len(HEADERS) - 1)), o.not_run])
            continue
        total.add(o.counters)
        rows.append([o.name, *map(str, o.counters.values()), f"{o.runs} ({o.seconds:.0f} s)"])
    ok = ok and not any(total.values())
    rows.append(["TOTAL", *map(str, total.values()), "all zero" if ok else "NOT all zero"])
    widths = [max(len(str(r[i])) for r in [cols, *rows]) for i in range(len(cols))]
    line = "+".join("-" * (w + 2) for w in widths)
    out = [f"|{line}|".replace("|", "+")]
    for i, r in enumerate([cols, *rows]):
        cells = (str(c).ljust(w) for c, w in zip(r, widths, strict=True))
        out.append("| " + " | ".join(cells) + " |")
        if i == 0 or i == len(rows) - 1:
            out.append(f"+{line}+")
    out.append(f"+{line}+")
    return "\n".join(out), ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ops.chaos", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="the CI subset")
    p.add_argument("--only", action="append", help="run this group (repeatable)")
    p.add_argument("--repeat", type=int, default=3, help="kills at each point (default 3)")
    p.add_argument("--jobs", type=int, default=100, help="jobs of many-jobs (default 100)")
    p.add_argument("--outage", type=float, default=12.0, help="seconds Redis is down")
    p.add_argument("--long-outage", type=float, default=rf.REDIS_OUTAGE_S,
                   help="seconds Redis is down in redis-down-3min (default 180)")  # fmt: skip
    p.add_argument("--keep", action="store_true", help="keep the folders (logs) afterwards")
    p.add_argument("--matrix", action="store_true", help="run only the kill matrix")
    p.add_argument("--cell", action="append", help="run only this matrix cell: PROCESS@PHASE")
    p.add_argument("--lanes", type=int, default=2, help="matrix deployments side by side")
    args = p.parse_args(argv)
    only_matrix = args.matrix or bool(args.cell)
    with_matrix = only_matrix or not (args.quick or args.only)
    cells = _cells(args.cell)
    groups = {} if only_matrix else plan(args)
    root = Path(tempfile.mkdtemp(prefix="colabq-chaos-"))
    started = time.monotonic()
    outcomes = []
    matrix_ok = True
    try:
        for name, run in groups.items():
            print(f"== {name}", flush=True)
            o = run(root)
            outcomes.append(o)
            for note in o.notes:
                print(f"   {note}", flush=True)
            for d in o.counters.details if o.counters else [o.not_run]:
                print(f"   ! {d}", flush=True)
        if with_matrix:
            print(f"== kill matrix ({len(cells)} cells, {args.lanes} lanes)", flush=True)
            results, problems, took_s = matrix_run.run_matrix(cells, root, REDIS_URL, args.lanes)
            text, matrix_ok = matrix_run.table(results, cells, problems)
            print(text)
            print(f"kill matrix: {took_s:.0f} s; {'PASS' if matrix_ok else 'FAIL'}", flush=True)
    finally:
        if args.keep:
            print(f"folders kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    ok = matrix_ok
    if groups:
        text, ok = table(outcomes)
        ok = ok and matrix_ok
        print(text)
    print(f"wall time {time.monotonic() - started:.0f} s; {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def _cells(names: list[str] | None) -> list[Cell]:
    if not names:
        return all_cells()
    try:
        return [parse_cell(n) for n in names]
    except ValueError as exc:
        raise SystemExit(str(exc)) from None


if __name__ == "__main__":
    sys.exit(main())
