"""The kill matrix: which host-side process exists at which phase of a job, how each phase is
reached and held long enough to find the process (the emulator's fault knobs, the Hub's delay),
and one cell run from submission to its verdict.

A cell: submit a job that prints numbered lines, wait until the job is in the phase *and* the
target process is alive, SIGKILL it (`targets`), recover as production would (a supervisor
restarts a killed worker main process; Celery replaces a pool child; beat's janitor runs every
few seconds on another host), wait for the end and judge it from outside: the final state, every
line exactly once in the log stream, the emulated account's billing (one assignment per segment,
none left open), the artifacts (in the store, or recovered from a retained VM), and no process of
the job left on the host. Cells run one after another on a lane (one deployment), so every
assignment opened during a cell is that cell's.

The pairs that do not exist, and why, are in `ABSENT`: the table says so.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from ops.chaos.fleet import Group, JobPlan, numbered, processes_mentioning, wait_until
from ops.chaos.targets import Proc, Target, all_processes, children, find, job_processes, kill
from worker.states import TERMINAL, JobState

if TYPE_CHECKING:
    from tests.hub.conftest import Hub

T = Target
S = JobState
POINT_TIMEOUT_S = 90.0  # submission -> the phase with its process alive
DEADLINE_S = 240.0  # submission -> terminal (a worker restart, a drain, an adoption)
SETTLE_S = 75.0  # terminal -> every assignment closed and every process of the job gone
HUB_REPO = "alice/runs"
# The idle timeout outlasts the lease TTL (3 s) + a janitor pass (every 4 s) + an adoption, as
# production's 180 s outlasts 30 s + 60 s: an owner that dies is adopted before its watchdog
# would stop a VM that sat idle (with 5 s the watchdog wins the race, which production never
# sees).
IDLE = "15s"


class Phase(StrEnum):
    ALLOCATING = "allocating"
    UPLOADING = "uploading"
    LAUNCHING = "launching"
    RUNNING = "running"
    PERSISTING = "persisting"
    RETAINED = "retained"
    RELEASING = "releasing"


OWNERS = (T.WORKER_MAIN, T.POOL_CHILD, T.WATCHDOG)
PAIRS: dict[Phase, tuple[Target, ...]] = {
    Phase.ALLOCATING: (*OWNERS, T.NEW),
    Phase.UPLOADING: (*OWNERS, T.UPLOAD),
    Phase.LAUNCHING: (*OWNERS, T.LAUNCH_EXEC),
    Phase.RUNNING: (*OWNERS, T.ATTACH_CLIENT, T.ATTACH_EXEC, T.LAUNCH_EXEC),
    Phase.PERSISTING: (*OWNERS, T.STOP),
    Phase.RETAINED: (*OWNERS, T.DOWNLOAD),
    Phase.RELEASING: (*OWNERS, T.STOP),
}
ABSENT: dict[Target, str] = {
    T.NEW: "runs only while allocating",
    T.UPLOAD: "runs only while uploading (STARTING); later uploads are the wrapper's, on the VM",
    T.LAUNCH_EXEC: "runs while launching, and on into running while it lingers after its cell; "
    "colabq kills every exec client when the release starts",
    T.ATTACH_EXEC: "runs only while running: it ends at the exit sentinel, and colabq kills "
    "every exec client when the release starts",
    T.ATTACH_CLIENT: "as the attach exec (it is the exec's parent)",
    T.DOWNLOAD: "runs while a retained VM's results are recovered; otherwise only for the "
    "watchdog's heartbeat read while no exec client lives, not a phase of a healthy job",
    T.STOP: "runs for the early release (persisting) and the release only",
}


@dataclass(frozen=True)
class Cell:
    target: Target
    phase: Phase

    @property
    def name(self) -> str:
        return f"{self.target.value}@{self.phase.value}"


def all_cells() -> list[Cell]:
    return [Cell(t, ph) for ph, ts in PAIRS.items() for t in ts]


def parse_cell(text: str) -> Cell:
    """`attach-client@running`, `launch-exec@running`, `worker-main@persisting`."""
    what, _, where = text.partition("@")
    key = what.strip().lower().replace("-", " ")
    for t in Target:
        if t.value.lower().startswith(key) or t.name.lower().replace("_", " ") == key:
            cell = Cell(t, Phase(where.strip().lower()))
            if t in PAIRS[cell.phase]:
                return cell
            raise ValueError(f"{cell.name}: that process does not exist then ({ABSENT.get(t)})")
    raise ValueError(f"unknown process {what!r}; one of {', '.join(t.value for t in Target)}")


# --- the jobs, the faults that hold each phase, and where it is ----------------------------------

LINES = {Phase.RUNNING: (60, 0.1)}  # (lines, pause): a run the kill lands in the middle of
DEFAULT_LINES = (20, 0.05)


def fault(g: Group, command: str, **spec: object) -> None:
    res = g.fleet.emu("faults", "set", command, json.dumps(spec))
    if res.returncode != 0:
        raise RuntimeError(f"fault {command} {spec}: {res.stderr}")


def hold_phase(g: Group, cell: Cell, hub: Hub | None) -> None:
    """The faults that keep the phase (and its process) long enough to be found."""
    ph = cell.phase
    if ph is Phase.ALLOCATING:
        fault(g, "new", delay_s=4, times=1)
    elif ph is Phase.UPLOADING:
        fault(g, "upload", delay_s=4, times=1)
    elif ph is Phase.LAUNCHING:
        fault(g, "exec", delay_s=4, times=1)  # the job's first exec is its launch cell
    elif ph is Phase.RUNNING and cell.target is T.LAUNCH_EXEC:
        fault(g, "exec", linger_s=30, times=1)  # the launch client outlives its cell
    elif ph is Phase.PERSISTING:
        fault(g, "stop", delay_s=6, times=1)  # the early release's stop, during verification
        assert hub is not None
        hub.admin.delay(method="GET", path=r"/tree/", delay_s=4)
    elif ph is Phase.RETAINED:
        fault(g, "download", delay_s=3)  # each file of the recovery
    elif ph is Phase.RELEASING:
        fault(g, "stop", delay_s=5, times=1)


def clear_faults(g: Group, hub: Hub | None) -> None:
    g.fleet.emu("faults", "clear")
    if hub is not None:
        hub.admin.clear_faults()


def in_phase(g: Group, cell: Cell, job: JobPlan) -> bool:
    state = g.state(job.job_id)
    ph = cell.phase
    if ph in (Phase.ALLOCATING, Phase.UPLOADING, Phase.LAUNCHING):
        want = {Phase.ALLOCATING: T.NEW, Phase.UPLOADING: T.UPLOAD, Phase.LAUNCHING: T.LAUNCH_EXEC}
        return bool(_find(g, want[ph], job))
    if ph is Phase.RUNNING:
        return state is S.RUNNING and "line-5" in g.fleet.output(job.job_id)
    if ph is Phase.PERSISTING:
        return state is S.PERSISTING
    if ph is Phase.RETAINED:
        return state is S.RETAINED and bool(_find(g, T.DOWNLOAD, job))
    return state is S.RELEASING and bool(_find(g, T.STOP, job))


def _find(g: Group, target: Target, job: JobPlan) -> list[Proc]:
    return find(target, g.fleet.job_dir(job.job_id), g.fleet.proc.pid)


def breaker(store: Path, run_name: str) -> str:
    """The job makes its own run folder in the store unwritable: the final upload fails and the
    VM keeps itself (RETAINED) until its results are recovered."""
    target = store / run_name  # moved, not removed: the job's user cannot empty it
    return f"mv {target} {target}.gone && echo blocked > {target}\n"


# --- one cell ----------------------------------------------------------------------------------


@dataclass
class CellResult:
    cell: Cell
    hit: bool = False
    killed: str = ""
    state: str = "?"
    reason: str = ""
    lines: str = ""
    vms: str = ""
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def expected(self) -> str:
        return expected_text(self.cell)

    @property
    def verdict(self) -> str:
        if self.problems:
            return "FAIL"
        return "PASS" if self.hit else "MISSED"


def expected_state(cell: Cell) -> JobState:
    return S.FAILED if cell.phase is Phase.RETAINED else S.SUCCEEDED


def expected_text(cell: Cell) -> str:
    n = LINES.get(cell.phase, DEFAULT_LINES)[0]
    what = "FAILED, results recovered" if cell.phase is Phase.RETAINED else "SUCCEEDED"
    return f"{what}; {n}/{n} lines once; 1 VM, 0 open"


def run_cell(g: Group, cell: Cell, hub: Hub | None, restart: Callable[[], None]) -> CellResult:
    """One cell on the lane's deployment `g`; `restart` is the supervisor's restart of a worker
    whose main process was killed."""
    started = time.monotonic()
    res = CellResult(cell)
    before = {str(b["endpoint"]) for b in g.fleet.billing()}
    n, pause_s = LINES.get(cell.phase, DEFAULT_LINES)
    body = numbered(n, pause_s)
    dest: tuple[str, ...] | None = None
    if cell.phase is Phase.PERSISTING:
        dest = ("--hub-repo", HUB_REPO)
    if cell.phase is Phase.RETAINED:
        body += "\n" + breaker(g.store, f"chaos-{g.name}-{g._seq + 1}")
    hold_phase(g, cell, hub)
    job = g.submit(f"kill {cell.name}", body, expect=frozenset({expected_state(cell)}),
                   deadline_s=DEADLINE_S, dest=dest, idle=IDLE)  # fmt: skip
    try:
        res.hit = wait_until(
            lambda: in_phase(g, cell, job) and _find(g, cell.target, job), POINT_TIMEOUT_S, 0.02
        )
        if res.hit:
            proc = _find(g, cell.target, job)[0]
            kill(cell.target, proc)
            res.killed = f"pid {proc.pid} in {g.state(job.job_id).name}"  # type: ignore[union-attr]
            if cell.target is T.WORKER_MAIN:
                restart()
    finally:
        clear_faults(g, hub)
    g.wait_terminal([job])
    _settle(g, job, before)
    judge(g, cell, job, before, res, hub)
    res.seconds = time.monotonic() - started
    return res


def _new_assignments(g: Group, before: set[str]) -> list[dict[str, object]]:
    return [
        b for b in g.fleet.billing()
        if str(b["endpoint"]) not in before and str(b["endpoint"]) not in g.foreign
    ]  # fmt: skip


def _settle(g: Group, job: JobPlan, before: set[str]) -> None:
    job_dir = g.fleet.job_dir(job.job_id)
    wait_until(
        lambda: all(b["unassigned_at"] is not None for b in _new_assignments(g, before))
        and not job_processes(job_dir),
        SETTLE_S, 0.5,
    )  # fmt: skip


def judge(
    g: Group, cell: Cell, job: JobPlan, before: set[str], res: CellResult, hub: Hub | None
) -> None:
    """What a user checks afterwards, from outside colabq."""
    try:
        rec = g.fleet.ledger.get(job.job_id)
    except Exception as exc:  # the record is gone: that is the verdict
        res.problems.append(f"no record: {exc}")
        return
    res.state, res.reason = rec.state.name, rec.reason
    want = expected_state(cell)
    if rec.state not in TERMINAL:
        res.problems.append(f"not terminal {DEADLINE_S:.0f} s after submission")
    elif rec.state is not want:
        res.problems.append(f"{rec.state.name}: {rec.reason[:200]}")
    n = LINES.get(cell.phase, DEFAULT_LINES)[0]
    got = [ln for ln in g.fleet.output(job.job_id) if ln.startswith("line-")]
    dupes = len(got) - len(set(got))
    res.lines = f"{len(set(got))}/{n}" + (f" ({dupes} twice)" if dupes else "")
    if got != [f"line-{i}" for i in range(1, n + 1)]:
        missing = n - len({f"line-{i}" for i in range(1, n + 1)} & set(got))
        res.problems.append(f"lines: {missing} missing, {dupes} twice, in order: {_ordered(got)}")
    made = _new_assignments(g, before)
    still = [str(b["endpoint"]) for b in made if b["unassigned_at"] is None]
    segments = int(rec.get("restarts") or 0) + 1
    res.vms = f"{len(made)} VM, {len(still)} open"
    if still:
        res.problems.append(f"leaked VM(s) {', '.join(still)}")
    if len(made) > segments:
        res.problems.append(f"{len(made)} assignments for {segments} segment(s)")
    left = job_processes(g.fleet.job_dir(job.job_id)) + orphaned_workers(g)
    if left:
        res.problems.append("left running: " + "; ".join(f"{p.pid} {p.short()}" for p in left))
    if rec.state is want and not _artifact_kept(g, job, rec.fields, hub):
        res.problems.append("the checkpoint is neither in the store nor recovered")


def orphaned_workers(g: Group) -> list[Proc]:
    """Celery processes of the lane that are not the running worker's (a pool child that
    outlived its killed main process)."""
    mine = {g.fleet.proc.pid, *(p.pid for p in children(g.fleet.proc.pid))}
    lane = set(processes_mentioning(str(g.root))) - mine
    return [p for p in all_processes() if p.pid in lane and any("celery" in a for a in p.argv)]


def _ordered(got: list[str]) -> bool:
    nums = [int(x.split("-", 1)[1]) for x in got if x.split("-", 1)[1].isdigit()]
    return nums == sorted(nums)


def _artifact_kept(g: Group, job: JobPlan, fields: Mapping[str, str], hub: Hub | None) -> bool:
    if fields.get("report"):
        local = str(json.loads(fields["report"]).get("results_local") or "")
        if local and (Path(local.split(":", 1)[-1]) / "ckpt" / "m.pt").is_file():
            return True
    if (g.store / job.run_name / "ckpt" / "m.pt").is_file():
        return True
    if hub is None:
        return False
    files = hub.api().list_repo_tree(HUB_REPO, recursive=True)
    return any(f.path == f"{job.run_name}/ckpt/m.pt" for f in files)
