"""Running the kill matrix (`python -m ops.chaos --matrix`) and printing its table.

The cells are shared out over `--lanes` deployments that run side by side (each its own worker,
key prefix, queues, emulator account, local Hub server and beat host running janitor passes),
one cell at a time on each. The table lists every pair that exists (process x phase: what was
killed, the outcome, the expected outcome, a verdict), then the pairs that do not exist and why.
A cell whose phase was not caught with its process alive is MISSED (a failure of the matrix).
"""

from __future__ import annotations

import queue
import sys
import threading
import time
import traceback
from pathlib import Path

from ops.chaos.fleet import Group, open_group
from ops.chaos.hub import hub_env
from ops.chaos.matrix import ABSENT, PAIRS, Cell, CellResult, Phase, run_cell
from ops.chaos.targets import Target


def run_lane(
    n: int,
    root: Path,
    redis_url: str,
    cells: queue.Queue[Cell],
    out: list[CellResult],
    problems: list[str],
) -> None:
    """One deployment: take cells until none is left."""
    name = f"matrix-{n}"
    with (
        hub_env(root / f"{name}-hub") as (env, hub, _has),
        open_group(name, root / name, redis_url, env) as g,
        g.beat(),
    ):
        while True:
            try:
                cell = cells.get_nowait()
            except queue.Empty:
                break
            say(f"   [{name}] {cell.name} ...")
            try:
                res = run_cell(g, cell, hub, lambda: _supervise(g))
            except Exception as exc:  # the table says so; never a pass
                where = traceback.extract_tb(exc.__traceback__)[-1]
                why = f"crashed at {Path(where.filename).name}:{where.lineno}: {exc!r}"
                res = CellResult(cell, problems=[why[:300]])
                traceback.print_exc(file=sys.__stderr__)
                g.wait_terminal(g.jobs)  # never into the next cell's window
            out.append(res)
            say(f"   [{name}] {cell.name}: {res.verdict} {res.state} ({res.seconds:.0f} s)"
                + "".join(f"\n      ! {p}" for p in res.problems))  # fmt: skip
        problems.extend(foreign_stopped(g))


def say(text: str) -> None:
    """Progress on the real stdout: a lane's `submit` runs through Typer's CliRunner, which
    swaps `sys.stdout` for the whole process while it runs (a plain print from another lane
    would land in that submit's output)."""
    out = sys.__stdout__
    if out is not None:
        out.write(text + "\n")
        out.flush()


def _supervise(g: Group) -> None:
    """What a supervisor does when the worker's main process died: start it again."""
    g.fleet.proc.wait(timeout=30)
    g.fleet.restart_worker()


def foreign_stopped(g: Group) -> list[str]:
    """The user's own assignments on the lane's account must have been left alone."""
    billed = {str(b["endpoint"]): b for b in g.fleet.billing()}
    return [
        f"{g.name}: the user's {whose} assignment {ep} was stopped"
        for ep, whose in g.foreign.items()
        if ep not in billed or billed[ep]["unassigned_at"] is not None
    ]


def run_matrix(
    cells: list[Cell], root: Path, redis_url: str, lanes: int
) -> tuple[list[CellResult], list[str], float]:
    """Every cell, over `lanes` deployments; the results in `cells`' order, and the lanes' own
    problems (the user's assignments stopped, a lane that could not start)."""
    todo: queue.Queue[Cell] = queue.Queue()
    for c in cells:
        todo.put(c)
    out: list[CellResult] = []
    problems: list[str] = []
    started = time.monotonic()
    threads = [
        threading.Thread(
            target=_guarded, args=(i + 1, root, redis_url, todo, out, problems), daemon=True
        )
        for i in range(max(1, min(lanes, len(cells))))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    order = {c.name: i for i, c in enumerate(cells)}
    out.sort(key=lambda r: order.get(r.cell.name, len(order)))
    return out, problems, time.monotonic() - started


def _guarded(*args: object) -> None:
    try:
        run_lane(*args)  # type: ignore[arg-type]
    except Exception as exc:
        args[-1].append(f"lane {args[0]} crashed: {type(exc).__name__}: {exc}"[:300])  # type: ignore[attr-defined]


def table(results: list[CellResult], wanted: list[Cell], problems: list[str]) -> tuple[str, bool]:
    """Process x phase -> outcome, expected, verdict; then the pairs that do not exist."""
    cols = ["process", "phase", "killed", "outcome", "expected", "verdict"]
    rows = []
    for r in results:
        outcome = f"{r.state}; {r.lines} lines; {r.vms}" if r.lines else r.state
        rows.append([r.cell.target.value, r.cell.phase.value, r.killed or "not caught",
                     outcome, r.expected, r.verdict])  # fmt: skip
    ran = {r.cell.name for r in results}
    for c in wanted:
        if c.name not in ran:
            rows.append([c.target.value, c.phase.value, "-", "not run", "-", "FAIL"])
    widths = [max(len(str(r[i])) for r in [cols, *rows]) for i in range(len(cols))]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    lines = [rule, _row(cols, widths), rule, *(_row(r, widths) for r in rows), rule]
    ok = bool(rows) and all(r[-1] == "PASS" for r in rows) and not problems
    passed = sum(r[-1] == "PASS" for r in rows)
    lines.append(f"{passed}/{len(rows)} cells pass")
    lines.extend(f"  ! {p}" for p in problems)
    for r in results:
        for p in r.problems:
            lines.append(f"  ! {r.cell.name}: {p}")
    lines.append("Pairs that do not exist (no such process in that phase of a healthy job):")
    for t in Target:
        absent = [ph.value for ph in Phase if t not in PAIRS[ph]]
        if absent:
            lines.append(f"  {t.value} x {', '.join(absent)}: {ABSENT.get(t, '')}")
    return "\n".join(lines), ok


def _row(cells: list[str], widths: list[int]) -> str:
    return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"
