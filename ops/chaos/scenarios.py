"""The scenarios: each sets up, injects its fault at its point, recovers as production would (a
supervisor restarts a killed worker; beat's janitor, on another host, adopts, stops orphans and
resends lost messages) and waits for the end. A group runs several scenarios on one deployment;
the counters are taken once per group (`checks.finish`).

A point that could not be hit (the job went past it before the fault landed) is reported as a
note; the fault is still injected, later, and the job still counted.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from ops.chaos.checks import ArtifactCheck, Counters, finish, settle
from ops.chaos.fleet import BOUND_HOST_S, Group, JobPlan, numbered, open_group, wait_until
from worker.states import TERMINAL, JobState

S = JobState
POINT_TIMEOUT_S = 60.0


@dataclass
class Outcome:
    """One group's result: its counters, or why it did not run."""

    name: str
    counters: Counters | None
    runs: str = ""
    not_run: str = ""
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


# --- where a job is -------------------------------------------------------------------------


def runner_phase(g: Group, job_id: str) -> str | None:
    try:
        return str(json.loads((g.fleet.job_dir(job_id) / "runner.json").read_text())["phase"])
    except (OSError, ValueError, KeyError):
        return None


def colab_call(g: Group, job_id: str, command: str) -> bool:
    """A `colab COMMAND` of the job runs now (its --config names the job's folder)."""
    folder = str(g.fleet.job_dir(job_id))
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if command in argv and any(folder in a for a in argv):
            return True
    return False


def states_seen(g: Group, job_id: str) -> list[JobState]:
    return [h.state for h in g.fleet.ledger.history(job_id)]


def vm_phase(g: Group, job_id: str) -> str | None:
    """The wrapper's phase, read from the emulated VM's disk."""
    ep = g.fleet.ledger.get(job_id).get("endpoint")
    path = Path(g.env["COLAB_EMU_HOME"]) / "vms" / str(ep) / "root/content/colab-jobs"
    try:
        return (path / job_id / "run" / "phase").read_text().strip()
    except OSError:
        return None


def received(g: Group, job_id: str) -> bool:
    """The worker reserved the job's message (Celery logs it when it receives it)."""
    text = (g.root / "worker.log").read_text(errors="replace")
    return f"[{job_id}] received" in text


def fault(g: Group, command: str, **spec: object) -> None:
    res = g.fleet.emu("faults", "set", command, json.dumps(spec))
    if res.returncode != 0:
        raise RuntimeError(f"fault {command} {spec}: {res.stderr}")


# --- kill -9 at each lifecycle point ----------------------------------------------------------

Waiter = Callable[[Group, JobPlan], bool]


@dataclass(frozen=True)
class KillPoint:
    name: str
    reached: Waiter
    faults: tuple[tuple[str, dict[str, object]], ...] = ()
    expect: frozenset[JobState] = frozenset({S.SUCCEEDED})


def not_over(g: Group, j: JobPlan) -> bool:
    return g.state(j.job_id) not in TERMINAL


KILL_POINTS: tuple[KillPoint, ...] = (
    # "before claim" is its own scenario (`kill_before_claim`): it needs a busy worker.
    KillPoint(
        "during checks",
        lambda g, j: g.state(j.job_id) is S.ALLOCATING and runner_phase(g, j.job_id) == "checking",
        (("usage", {"delay_s": 2, "times": 1}),),
    ),
    KillPoint(
        "during allocation",
        lambda g, j: colab_call(g, j.job_id, "new"),
        (("new", {"delay_s": 2, "times": 1}),),
        # The dying owner's `colab new` dies with it (its stdout is a pipe to the owner) before
        # it assigns anything, or lives on and records the endpoint. In the first case no
        # endpoint is ever recorded and the adopter cannot prove nothing was assigned (a `[?]`
        # it must never touch): it refuses to allocate again (invariant 6) and ends the job
        # FAILED_LOST, saying why. In the second the job goes on and succeeds.
        frozenset({S.SUCCEEDED, S.FAILED_LOST}),
    ),
    KillPoint(
        "after allocation",
        lambda g, j: g.state(j.job_id) is S.STARTING,
        (("upload", {"delay_s": 2, "times": 1}),),
    ),
    KillPoint(
        "during upload",
        lambda g, j: colab_call(g, j.job_id, "upload"),
        (("upload", {"delay_s": 2, "times": 2}),),
    ),
    KillPoint(
        "mid-run",
        lambda g, j: "line-5" in g.fleet.output(j.job_id),
    ),
    KillPoint(
        "during final sync",
        lambda g, j: vm_phase(g, j.job_id) == "finishing",
    ),
    KillPoint(
        "persist",
        lambda g, j: S.PERSISTING in states_seen(g, j.job_id) and not_over(g, j),
        (("stop", {"delay_s": 3, "times": 1}),),
    ),
    KillPoint(
        "release",
        lambda g, j: S.RELEASING in states_seen(g, j.job_id) and colab_call(g, j.job_id, "stop"),
        (("stop", {"delay_s": 3, "times": 1}),),
    ),
)


def kill_at(g: Group, point: KillPoint, missed: list[str]) -> list[JobPlan]:
    for command, spec in point.faults:
        fault(g, command, **spec)
    job = g.submit(f"kill -9 {point.name}", numbered(30), expect=point.expect)
    if not wait_until(lambda: point.reached(g, job), POINT_TIMEOUT_S, 0.02):
        missed.append(point.name)
    g.kill_worker()
    g.fleet.emu("faults", "clear")
    return [job]


def kill_before_claim(g: Group, missed: list[str]) -> list[JobPlan]:
    """The worker received the job's message but has not claimed the job: its pool process is
    frozen (SIGSTOP) first, so the message waits, reserved, in the worker's main process."""
    for pid in _children(g.fleet.proc.pid):
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
    job = g.submit("kill -9 before claim", numbered(10))
    if not wait_until(
        lambda: received(g, job.job_id) and g.state(job.job_id) is S.QUEUED, POINT_TIMEOUT_S
    ):
        missed.append("before claim")
    g.kill_worker()
    return [job]


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with suppress(OSError, ValueError, IndexError):
                stat = (entry / "stat").read_text()
                if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
                    found.append(int(entry.name))
    return found


def kills(g: Group, repeat: int, points: list[str] | None) -> tuple[set[str], str, list[str]]:
    chosen = [p for p in KILL_POINTS if points is None or p.name in points]
    with_claim = points is None or "before claim" in points
    stuck: set[str] = set()
    missed: list[str] = []
    n = 0
    with g.beat():
        for _ in range(repeat):
            if with_claim:
                stuck |= settle(g, kill_before_claim(g, missed))
                n += 1
            for point in chosen:
                stuck |= settle(g, kill_at(g, point, missed))
                n += 1
    runs = f"{n} kills, {n - len(missed)} at their point"
    return stuck, runs, [f"point not caught: {m}" for m in missed]


# --- the whole host -------------------------------------------------------------------------


def host_lost(g: Group) -> tuple[set[str], str, list[str]]:
    """The worker and every watchdog and exec client of its state dir die mid-run; nothing
    restarts on that host. Beat's janitor, on another host, adopts the job."""
    job = g.submit("host lost mid-run", numbered(60), bound_s=BOUND_HOST_S, deadline_s=180)
    ok = wait_until(lambda: "line-10" in g.fleet.output(job.job_id), POINT_TIMEOUT_S)
    with g.beat(every_s=5):
        g.fleet.lose_host()
        stuck = settle(g, [job])
        # A new worker on a new host afterwards: the deployment serves jobs again.
        g.fleet.env["COLABQ_STATE_DIR"] = str(g.root / "host3" / "state")
        g.fleet.restart_worker()
        stuck |= settle(g, [g.submit("after host loss", numbered(5))])
    return stuck, "1 host lost, then 1 job on a new host", [] if ok else ["point not caught"]


# --- CLI faults -----------------------------------------------------------------------------


def cli_faults(g: Group) -> tuple[set[str], str, list[str]]:
    stuck: set[str] = set()
    notes: list[str] = []
    with g.beat():
        # `colab status` failing (5xx) for a while, mid-run and through the release.
        fault(g, "status", http=503, times=12)
        stuck |= settle(g, [g.submit("status errors", numbered(40))])
        g.fleet.emu("faults", "clear")
        # Stale BUSY: the attach client is killed, `colab status` keeps saying BUSY.
        j = g.submit("stale BUSY", numbered(50))
        if wait_until(lambda: "line-10" in g.fleet.output(j.job_id), POINT_TIMEOUT_S):
            _kill_client(g, j.job_id)
        else:
            notes.append("stale BUSY: point not caught")
        stuck |= settle(g, [j])
        # Endpoint mismatch: someone runs `colab new -s NAME` again (the name moves to another
        # endpoint). colabq must not stop the new one; the janitor stops colabq's orphan.
        j = g.submit("endpoint mismatch", numbered(40))
        if wait_until(lambda: "line-5" in g.fleet.output(j.job_id), POINT_TIMEOUT_S):
            name = str(g.fleet.ledger.get(j.job_id).get("session"))
            config = g.fleet.job_dir(j.job_id) / "colab-sessions.json"
            res = g.fleet.emu("reassign", "--config", str(config), name)
            if res.returncode == 0 and res.stdout.strip():
                g.foreign[res.stdout.strip()] = "reassigned"
            else:
                notes.append(f"reassign failed: {res.stderr.strip()[-200:]}")
        stuck |= settle(g, [j])
        # A hung exec: the attach client's connection drops mid-run and the exec that
        # replaces it never gets a reply from the kernel (once); the stalled client is
        # replaced again and the job ends right.
        j = g.submit("exec hang", numbered(60))
        if wait_until(lambda: "line-5" in g.fleet.output(j.job_id), POINT_TIMEOUT_S):
            fault(g, "exec", hang=True, times=1)
            g.fleet.emu("drop-connections", str(g.fleet.ledger.get(j.job_id).get("endpoint")))
        else:
            notes.append("exec hang: point not caught")
        stuck |= settle(g, [j])
        g.fleet.emu("faults", "clear")
        # Preemption: the server drops the VM mid-run; without restarts the job ends VM_LOST,
        # with one it resumes from its checkpoint on a new VM (two segments) and succeeds.
        stuck |= _preempt(g, restarts=False, notes=notes)
        stuck |= _preempt(g, restarts=True, notes=notes)
    return stuck, "5 CLI faults, 2 preemptions", notes


def _kill_client(g: Group, job_id: str) -> None:
    try:
        d = json.loads((g.fleet.job_dir(job_id) / "runner.json").read_text())
        pid = int(d["client"]["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    with suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _preempt(g: Group, *, restarts: bool, notes: list[str]) -> set[str]:
    if restarts:
        body = (
            'if [ -n "${COLABQ_RESUME_FROM:-}" ]; then echo "resumed"; else\n'
            "mkdir -p ckpt && echo weights > ckpt/m.pt\n"
            'echo "checkpoint written"; sleep 120; fi'
        )
        j = g.submit("preempted, restarted", body, "--max-restarts", "1", "--sync-interval", "1s",
                     deadline_s=180)  # fmt: skip
        ckpt = g.store / j.run_name / "ckpt" / "m.pt"
        hit = wait_until(ckpt.exists, POINT_TIMEOUT_S)
    else:
        j = g.submit("preempted", numbered(300), expect=frozenset({S.VM_LOST}))
        hit = wait_until(lambda: "line-5" in g.fleet.output(j.job_id), POINT_TIMEOUT_S)
    if hit:
        g.fleet.emu("unassign", str(g.fleet.ledger.get(j.job_id).get("endpoint")))
    else:
        notes.append(f"{j.scenario}: point not caught")
    return settle(g, [j])


# --- many jobs, many workers -----------------------------------------------------------------


def many_jobs(g: Group, jobs: int, workers: int) -> tuple[set[str], str, list[str]]:
    g.add_workers(workers - 1)
    plans = [g.submit("many jobs", "echo hello\nsleep 1", deadline_s=60 + jobs * 6)
             for _ in range(jobs)]  # fmt: skip
    stuck = settle(g, plans)
    return stuck, f"{jobs} jobs over {workers} workers", []


# --- the Hub down at the final upload ----------------------------------------------------------


def hub_down(g: Group, hub: object) -> tuple[set[str], str, list[str]]:
    """The commit endpoint refuses while the job's final upload runs: the VM is kept (it holds
    the only copy), its results are recovered to the worker host, then it is released."""
    admin = hub.admin  # type: ignore[attr-defined]
    with g.beat():
        j = g.submit("hub down at final upload", "sleep 3", expect=frozenset({S.FAILED}),
                     dest=("--hub-repo", "alice/runs"))  # fmt: skip
        hit = wait_until(lambda: "started" in g.fleet.output(j.job_id), POINT_TIMEOUT_S)
        admin.down(path=r"/commit/")
        stuck = settle(g, [j])
        admin.clear_faults()
        after = g.submit("hub back", "sleep 1", dest=("--hub-repo", "alice/runs"))
        stuck |= settle(g, [after])
    return stuck, "1 final upload refused, then 1 job", [] if hit else ["point not caught"]


# --- running a group ------------------------------------------------------------------------

Body = Callable[[Group], tuple[set[str], str, list[str]]]


def run_group(
    name: str,
    root: Path,
    redis_url: str,
    body: Body,
    extra_env: dict[str, str] | None = None,
    artifact_in_store: ArtifactCheck | None = None,
) -> Outcome:
    started = time.monotonic()
    with open_group(name, root / name, redis_url, extra_env) as g:
        try:
            stuck, runs, notes = body(g)
        except Exception as exc:  # the table says so; it never shows a zero for this
            return Outcome(name, None, not_run=f"crashed: {type(exc).__name__}: {exc}"[:200],
                           seconds=time.monotonic() - started)  # fmt: skip
        counters = finish(g, stuck, artifact_in_store)
        notes = [*notes, *g.notes]
        if g.janitor_passes:
            notes.append(f"{g.janitor_passes} janitor passes")
    return Outcome(name, counters, runs, notes=notes, seconds=time.monotonic() - started)
