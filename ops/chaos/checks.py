"""The counters of a scenario group, computed from what the outside world saw: the emulated
account's billing (every assignment, open or ended, with its times), the ledger, the store, the
job scripts' own end times and /proc. Nothing here asks colabq what it thinks it did.
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path

from ops.chaos.fleet import Group, JobPlan, processes_mentioning, wait_until
from worker.states import TERMINAL

LOST_GRACE_S = 60.0  # past its deadline, a job still not terminal after this long is lost
SETTLE_S = 65.0  # how long sessions and processes may take to go after the last job ended


@dataclass
class Counters:
    leaked: int = 0
    duplicates: int = 0
    lost_jobs: int = 0
    lost_artifacts: int = 0
    wrong_states: int = 0
    stuck: int = 0
    foreign_stops: int = 0
    leftovers: int = 0
    gpu_s_over: int = 0
    lines: int = 0
    unmet: int = 0
    details: list[str] = field(default_factory=list, compare=False)

    def values(self) -> list[int]:
        return [getattr(self, f.name) for f in fields(self) if f.name != "details"]

    def add(self, other: Counters) -> None:
        for f in fields(self):
            if f.name != "details":
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        self.details.extend(other.details)


HEADERS = (
    "leaked sessions",
    "duplicate allocations",
    "lost jobs",
    "lost artifacts",
    "wrong final states",
    "stuck jobs",
    "foreign stops",
    "leftover processes",
    "GPU-s beyond bounds",
    "lost/dup lines",
    "unmet checks",
)


@dataclass
class Seen:
    """What the world looks like at the end of a group."""

    billing: list[dict[str, object]]
    owners: dict[str, set[str]]  # endpoint -> the jobs that recorded it or ran on it
    stuck: set[str]  # jobs not terminal at their deadline


def settle(group: Group, jobs: list[JobPlan] | None = None) -> set[str]:
    """Wait for the group's jobs: returns the ids of those not terminal at their deadline
    (stuck); the others then get `LOST_GRACE_S` more before they count as lost."""
    jobs = group.jobs if jobs is None else jobs
    group.wait_terminal(jobs)
    stuck = {j.job_id for j in jobs if group.state(j.job_id) not in TERMINAL}
    # A record gone from the ledger (Redis lost its data) will not come back by waiting.
    late = [j for j in jobs if j.job_id in stuck and group.state(j.job_id) is not None]
    if late:
        group.wait_terminal(late, extra_s=LOST_GRACE_S)
    return stuck


def finish(
    group: Group, stuck: set[str], artifact_in_store: ArtifactCheck | None = None
) -> Counters:
    """After the group's scenarios: give sessions and processes time to go (they must, within
    the bounds), stop the workers, and count."""
    marks = tuple(f"COLAB_EMU_VM_MARK={group.env['COLAB_EMU_HOME']}::{ep}" for ep in group.foreign)
    wait_until(lambda: not _open_colabq(group) and not _leftovers(group, marks), SETTLE_S, 1.0)
    group.stop_workers()
    seen = Seen(group.fleet.billing(), endpoint_owners(group), stuck)
    c = Counters()
    _sessions(group, seen, c)
    _jobs(group, seen, c, artifact_in_store or local_store_has)
    for pid in _leftovers(group, marks):
        c.leftovers += 1
        c.details.append(f"leftover process {pid}: {_cmdline(pid)[:160]}")
    c.unmet = len(group.unmet)
    c.details.extend(f"unmet: {u}" for u in group.unmet)
    return c


def _open_colabq(group: Group) -> list[str]:
    return [
        str(b["endpoint"]) for b in group.fleet.billing()
        if b["unassigned_at"] is None and b["endpoint"] not in group.foreign
    ]  # fmt: skip


def _leftovers(group: Group, marks: tuple[str, ...]) -> list[int]:
    workers = {p.pid for p in [group.fleet.proc, *group.extra_workers] if p.poll() is None}
    pids = processes_mentioning(str(group.root), marks)
    return [p for p in pids if p not in workers and _ppid(p) not in workers]


def _ppid(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "(gone)"


def endpoint_owners(group: Group) -> dict[str, set[str]]:
    """Which job each endpoint belongs to: the ledger's record, the endpoint files every host
    wrote for the job (worker, adopters, janitor), and the job folder on the VM's disk."""
    owners: dict[str, set[str]] = defaultdict(set)
    ids = {j.job_id for j in group.jobs}
    for j in group.jobs:
        try:
            ep = group.fleet.ledger.get(j.job_id).get("endpoint")
        except Exception:
            ep = None
        if ep:
            owners[ep].add(j.job_id)
    for f in group.root.glob("**/jobs/*/endpoints/*"):
        job = f.parent.parent.name
        if job in ids and f.is_file():
            owners[f.read_text().strip()].add(job)
    emu = Path(group.env["COLAB_EMU_HOME"])
    for where in ("vms", "released"):
        for d in emu.glob(f"{where}/*/root/content/colab-jobs/*"):
            if d.name in ids:
                owners[d.parents[3].name].add(d.name)
    return owners


def _sessions(group: Group, seen: Seen, c: Counters) -> None:
    billed = {str(b["endpoint"]): b for b in seen.billing}
    for ep, whose in group.foreign.items():
        if ep not in billed or billed[ep]["unassigned_at"] is not None:
            c.foreign_stops += 1
            c.details.append(f"foreign stop: the user's {whose} assignment {ep} was ended")
    per_job: dict[str, int] = defaultdict(int)
    for ep, b in billed.items():
        if ep in group.foreign:
            continue
        if b["unassigned_at"] is None:
            c.leaked += 1
            c.details.append(f"leaked: {ep} still assigned (jobs {sorted(seen.owners[ep])})")
        mine = seen.owners.get(ep, set())
        if not mine:
            # colabq made it (nothing else allocates here) but no job recorded it.
            c.duplicates += 1
            c.details.append(f"duplicate: {ep} was assigned for no job colabq recorded")
        for job in mine:
            per_job[job] += 1
    wanted = {j.job_id: j.assignments for j in group.jobs if j.assignments is not None}
    for job, n in per_job.items():
        segments = wanted.get(job) or _segments(group, job)
        if n > segments:
            c.duplicates += n - segments
            c.details.append(f"duplicate: job {job} had {n} assignments for {segments} segment(s)")


def _segments(group: Group, job_id: str) -> int:
    try:
        return int(group.fleet.ledger.get(job_id).get("restarts") or 0) + 1
    except Exception:
        return 1


ArtifactCheck = Callable[[Group, JobPlan, str], bool]


def local_store_has(group: Group, plan: JobPlan, path: str) -> bool:
    return (group.store / plan.run_name / path).is_file()


def _recovered_has(group: Group, plan: JobPlan, path: str) -> bool:
    """A copy recovered from a retained VM to the worker host, named in the job's report."""
    try:
        report = json.loads(group.fleet.ledger.get(plan.job_id).get("report") or "{}")
    except Exception:
        return False
    local = str(report.get("results_local") or "")
    return bool(local) and (Path(local.split(":", 1)[-1]) / path).is_file()


def _jobs(group: Group, seen: Seen, c: Counters, has: ArtifactCheck) -> None:
    ends = _assignment_ends(seen)
    for j in group.jobs:
        tag = f"{j.scenario} job {j.job_id}"
        try:
            rec = group.fleet.ledger.get(j.job_id)
        except Exception:
            rec = None
        if rec is None or rec.state not in TERMINAL:
            c.lost_jobs += 1
            c.details.append(f"lost: {tag} is {rec.state.name if rec else 'missing'}")
        elif rec.state not in j.expect:
            c.wrong_states += 1
            want = "/".join(sorted(s.name for s in j.expect))
            c.details.append(f"wrong state: {tag} {rec.state.name} ({rec.reason}); want {want}")
        if j.job_id in seen.stuck:
            c.stuck += 1
            c.details.append(f"stuck: {tag} not terminal {j.deadline_s:.0f} s after submission")
        if j.lines and rec is not None:
            _lines(group, j, tag, c)
        ended = _ended_at(j)
        if ended is None:
            continue
        if rec is not None and rec.get("exit_code") in (None, "0"):
            for path in j.artifacts:
                if not has(group, j, path) and not _recovered_has(group, j, path):
                    c.lost_artifacts += 1
                    c.details.append(f"lost artifact: {tag} {path}")
        last = max((ends[ep] for ep, who in seen.owners.items() if j.job_id in who and ep in ends),
                   default=None)  # fmt: skip
        if last is not None and last - ended > j.bound_s:
            over = math.ceil(last - ended - j.bound_s)
            c.gpu_s_over += over
            c.details.append(
                f"GPU held: {tag} released {last - ended:.1f} s after its end (bound "
                f"{j.bound_s:.0f} s)"
            )


def _lines(group: Group, plan: JobPlan, tag: str, c: Counters) -> None:
    """line-1 .. line-N each exactly once in the job's log stream: a missing or repeated line
    counts once per line."""
    seen: dict[str, int] = defaultdict(int)
    for text in group.fleet.output(plan.job_id):
        if text.startswith("line-"):
            seen[text] += 1
    want = {f"line-{i}" for i in range(1, plan.lines + 1)}
    missing = len(want - set(seen))
    repeated = sum(n - 1 for t, n in seen.items() if t in want and n > 1)
    extra = sum(n for t, n in seen.items() if t not in want)
    if missing or repeated or extra:
        c.lines += missing + repeated + extra
        c.details.append(f"lines: {tag} {missing} missing, {repeated} repeated, {extra} unknown")


def _assignment_ends(seen: Seen) -> dict[str, float]:
    now = time.time()
    return {
        str(b["endpoint"]): float(b["unassigned_at"]) if b["unassigned_at"] is not None else now  # type: ignore[arg-type]
        for b in seen.billing
    }


def _ended_at(plan: JobPlan) -> float | None:
    try:
        return float(plan.ended_file.read_text())
    except (OSError, ValueError):
        return None
