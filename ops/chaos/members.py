"""The fleet survives its members (issue 17): the groups where one host breaks under a healthy
fleet, and where Colab says "not now". Each drives the emulator's fault knobs the way
`tests/integration/test_fleet_members.py` does, on a deployment of its own:

- `broken-login`: two workers on two hosts; after both started, one host's Colab login breaks
  (`auth` 401 for that HOME only). Every job succeeds on the healthy host, none ever FAILED, the
  broken worker is drained (`colabq workers --json`), and undrained once its login works again.
- `broken-state-dir`: the same, the second host's state dir broken instead (its `jobs` folder
  turned into a file after it started): no job FAILED or left QUEUED, the broken worker drained.
- `capacity`: `colab new` refused N times (jobs wait with the scaled backoff and succeed, the
  refusals counted on them); a `--gpu A100,L4` job with A100 refused runs on L4 (a worker serving
  both queues); a VM served with another GPU is released at once and the job runs on its own.

What the table's counters cannot see (a worker's drain, the GPU a job ran on, the refusals
counted) are the group's own checks: each that fails counts in "unmet checks".
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from ops.chaos.checks import endpoint_owners, settle
from ops.chaos.fleet import Group, JobPlan, numbered, wait_until
from ops.chaos.scenarios import fault, states_seen
from worker.states import JobState

S = JobState
LINES = 5
# Seconds, not minutes: the capacity backoff and a drained worker's probes.
MEMBERS_ENV = {
    "COLABQ_CAPACITY_BACKOFF_S": "0.5",
    "COLABQ_CAPACITY_BACKOFF_MAX_S": "2",
    "COLABQ_DRAIN_PROBE_S": "1",
    "COLABQ_DRAIN_PROBE_MAX_S": "4",
}
DRAIN_WAIT_S = 90.0
Result = tuple[set[str], str, list[str]]


def workers(g: Group) -> list[dict[str, object]]:
    shown = g.cli("workers")
    return [dict(w) for w in shown] if isinstance(shown, list) else []


def drained(g: Group) -> list[dict[str, object]]:
    return [w for w in workers(g) if w.get("state") == "drained"]


def _never_failed(g: Group, jobs: list[JobPlan]) -> None:
    for j in jobs:
        seen = states_seen(g, j.job_id)
        g.check(S.FAILED not in seen, f"{j.scenario} job {j.job_id} was FAILED on its way")


def _ran_elsewhere(g: Group, jobs: list[JobPlan], bad: str) -> int:
    """Checks that no job ended on the broken worker; returns how many it had given back."""
    given_back = 0
    healthy = {str(w["name"]) for w in workers(g)} - {bad}
    for j in jobs:
        rec = g.fleet.ledger.get(j.job_id)
        on = rec.get("worker")
        g.check(on in healthy, f"{j.scenario} job {j.job_id} ended on {on}, not a healthy worker")
        given_back += bool(rec.get("putbacks"))
    return given_back


def _broken_host(
    g: Group, what: str, jobs_n: int, break_it: Callable[[dict[str, str]], None]
) -> tuple[str, list[JobPlan], set[str]]:
    """A second host's worker started, then broken; `jobs_n` jobs submitted and settled.
    Returns the drained worker's name ("" if none was shown drained), the jobs, the stuck."""
    env2 = g.fleet.other_host("host2")
    g.add_worker(env2, "host2")
    break_it(env2)
    jobs = [g.submit(what, numbered(LINES), lines=LINES, deadline_s=240) for _ in range(jobs_n)]
    shown = wait_until(lambda: len(drained(g)) == 1, DRAIN_WAIT_S, 0.5)
    g.check(shown, f"{what}: the broken worker never shown drained in {DRAIN_WAIT_S:.0f} s")
    bad = drained(g)
    name = str(bad[0]["name"]) if len(bad) == 1 else ""
    stuck = settle(g, jobs)
    g.check(len(drained(g)) == 1, f"{what}: drained workers at the end: {len(drained(g))}")
    return name, jobs, stuck


def broken_login(g: Group) -> Result:
    def break_login(env2: dict[str, str]) -> None:
        fault(g, "auth", fail=True, mode="http", match_home=env2["HOME"])

    bad, jobs, stuck = _broken_host(g, "login broken on host 2", 8, break_login)
    given_back = _ran_elsewhere(g, jobs, bad) if bad else 0
    _never_failed(g, jobs)
    if bad:
        [card] = [w for w in workers(g) if w["name"] == bad]
        reason = str(card.get("drain_reason"))
        g.check("credentials" in reason or "401" in reason, f"drain reason: {reason!r}")
    # Its login repaired, the drained worker probes healthy and takes jobs again.
    g.fleet.emu("faults", "clear", "auth")
    back = wait_until(lambda: not drained(g), 60, 0.5)
    g.check(back, "the repaired worker still drained 60 s after its login works again")
    runs = f"{len(jobs)} jobs, {given_back} given back by the broken host, then undrained"
    return stuck, runs, []


def broken_state_dir(g: Group) -> Result:
    def break_state_dir(env2: dict[str, str]) -> None:
        jobs_dir = Path(env2["COLABQ_STATE_DIR"]) / "jobs"
        shutil.rmtree(jobs_dir, ignore_errors=True)
        jobs_dir.write_text("not a folder")

    bad, jobs, stuck = _broken_host(g, "state dir broken on host 2", 5, break_state_dir)
    given_back = _ran_elsewhere(g, jobs, bad) if bad else 0
    _never_failed(g, jobs)
    if bad:
        [card] = [w for w in workers(g) if w["name"] == bad]
        reason = str(card.get("drain_reason"))
        g.check("state dir" in reason, f"drain reason: {reason!r}")
    return stuck, f"{len(jobs)} jobs, {given_back} given back by the broken host", []


# --- capacity -------------------------------------------------------------------------------


def _billed(g: Group, job: JobPlan) -> list[dict[str, object]]:
    """The job's assignments, oldest first."""
    owners = endpoint_owners(g)
    rows = [b for b in g.fleet.billing() if job.job_id in owners.get(str(b["endpoint"]), set())]
    return sorted(rows, key=lambda b: float(b["assigned_at"]))  # type: ignore[arg-type]


def capacity(g: Group) -> Result:
    stuck: set[str] = set()
    # `colab new` refused (HTTP 412) four times: both jobs wait and succeed.
    refusals = 4
    fault(g, "new", http=412, times=refusals)
    waiting = [g.submit("412 refused", numbered(LINES), lines=LINES) for _ in range(2)]
    stuck |= settle(g, waiting)
    counted = sum(int(g.fleet.ledger.get(j.job_id).get("capacity_refusals") or 0) for j in waiting)
    g.check(counted == refusals, f"412: {counted} refusals counted on the jobs, {refusals} made")
    _never_failed(g, waiting)
    for j in waiting:
        g.check(len(_billed(g, j)) == 1, f"412: job {j.job_id} had {len(_billed(g, j))} VMs")
    # A100 refused (accelerator rejected): the fallback L4, by a worker serving both queues.
    g.add_worker({**g.env, "COLABQ_WORKER_GPUS": "A100,L4"}, "a100-l4", ("gpu.a100", "gpu.l4"))
    fault(g, "new", http=400, times=1)
    fb = g.submit("A100 refused, L4", numbered(LINES), "--gpu", "A100,L4", lines=LINES)
    stuck |= settle(g, [fb])
    gpu = g.fleet.ledger.get(fb.job_id).get("gpu")
    g.check(gpu == "L4", f"fallback: the job ran on {gpu}, not L4")
    accels = [b["accelerator"] for b in _billed(g, fb)]
    g.check(accels == ["L4"], f"fallback: its assignments were {accels}, not one L4")
    # Colab serves an L4 for the T4 asked: released at once, the job waits for its own.
    fault(g, "new", serve_gpu="L4", times=1)
    wrong = g.submit("served L4 for T4", numbered(LINES), lines=LINES, assignments=2)
    stuck |= settle(g, [wrong])
    billed = _billed(g, wrong)
    accels = [b["accelerator"] for b in billed]
    g.check(accels == ["L4", "T4"], f"wrong GPU: its assignments were {accels}, not L4 then T4")
    if billed and billed[0]["unassigned_at"] is not None:
        held = float(billed[0]["unassigned_at"]) - float(billed[0]["assigned_at"])  # type: ignore[arg-type]
        g.check(held < 30, f"wrong GPU: the L4 VM was held {held:.0f} s before its release")
    _never_failed(g, [fb, wrong])
    return stuck, f"{refusals} refusals over 2 jobs, 1 fallback, 1 wrong GPU served", []
