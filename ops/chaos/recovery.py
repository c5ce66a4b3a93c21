"""Faults the owner of a running job must ride out (issue 17), each a group on a deployment of
its own, each fault injected the way its integration test does:

- `launch-exec-kill`: the launch cell's `colab exec` lingers after its cell (the real client's
  slow exit, the emulator's `linger_s`) and is SIGKILLed in that window
  (`tests/integration/test_launch_linger.py`): SUCCEEDED with every line once.
- `retained-orphan`: the Hub refuses the final upload (the VM keeps itself, RETAINED) and the
  owner's recovery of the results fails; then the owner's host is lost. Beat's janitor adopts
  the job, the adopter recovers the results to its own host and releases the VM
  (`tests/integration/test_janitor_retained.py`).
- `token-expiry`: the emulator's proxy tokens live 6 s (refresh margin 2 s) under jobs running
  several lifetimes (each attach client cut off when its token expires, and replaced), one of
  them with its attach client killed and the next attach reaching the proxy after its token
  expired (401, the record pruned: `tests/integration/test_token_expiry.py`): SUCCEEDED with
  every line once, on one assignment.
"""

from __future__ import annotations

import json
import os
import signal
from contextlib import suppress
from pathlib import Path

from ops.chaos.checks import settle
from ops.chaos.fleet import BOUND_HOST_S, Group, numbered, wait_until
from ops.chaos.scenarios import POINT_TIMEOUT_S, fault
from ops.chaos.targets import Target, find
from worker.states import JobState

S = JobState
Result = tuple[set[str], str, list[str]]
TOKEN_ENV = {
    "COLAB_EMU_TOKEN_LIFETIME_S": "6",
    "COLAB_EMU_TOKEN_REFRESH_MARGIN_S": "2",
    # The delayed attach receives nothing for 6.5 s: not a dropped connection (a client cut off
    # by its token's expiry is replaced after this long).
    "COLABQ_ATTACH_STALL_S": "12",
}
# A failed recovery is tried again after 1, 2, 2 ... s; nobody but colabq stops the VM.
RETAINED_ENV = {"COLABQ_REATTACH_BACKOFF_MAX_S": "2", "COLABQ_RELEASE_HOLD_S": "600"}
HUB_REPO = "alice/runs"
RECOVERY_FAILS = "recovering the results failed"


def _log(g: Group, job_id: str) -> list[str]:
    return [ln.text for ln in g.fleet.ledger.read_log(job_id, count=100_000)]


# --- the launch exec killed while it lingers -------------------------------------------------


def launch_exec_kill(g: Group) -> Result:
    lines = 60
    fault(g, "exec", linger_s=600, times=1)  # far longer than the group: it lingers when looked
    j = g.submit("launch exec killed lingering", numbered(lines), lines=lines)

    def lingering() -> list[int]:
        if g.state(j.job_id) is not S.RUNNING:
            return []
        procs = find(Target.LAUNCH_EXEC, g.fleet.job_dir(j.job_id), g.fleet.proc.pid)
        return [p.pid for p in procs]

    hit = wait_until(lingering, POINT_TIMEOUT_S, 0.05)
    for pid in lingering():
        with suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # the OOM killer, a restart
    g.fleet.emu("faults", "clear")
    stuck = settle(g, [j])
    running = [h.state for h in g.fleet.ledger.history(j.job_id)].count(S.RUNNING)
    g.check(running == 1, f"the job was RUNNING {running} times, not once")
    return stuck, "1 launch exec killed while lingering", [] if hit else ["point not caught"]


# --- a retained VM whose owner's host is lost -------------------------------------------------


def retained_orphan(g: Group, hub: object) -> Result:
    admin = hub.admin  # type: ignore[attr-defined]
    notes: list[str] = []
    with g.beat():
        j = g.submit("retained, owner's host lost", "sleep 2", expect=frozenset({S.FAILED}),
                     bound_s=BOUND_HOST_S, deadline_s=240,
                     dest=("--hub-repo", HUB_REPO))  # fmt: skip
        if not wait_until(lambda: "started" in g.fleet.output(j.job_id), POINT_TIMEOUT_S):
            notes.append("point not caught: started")
        admin.down(path=r"/commit/")  # the final upload fails: the VM keeps itself
        fault(g, "ls", fail="Contents API: 503")  # and the owner cannot recover its results
        retained = wait_until(
            lambda: (
                g.state(j.job_id) is S.RETAINED
                and RECOVERY_FAILS in g.fleet.ledger.get(j.job_id).reason
            ),
            POINT_TIMEOUT_S,
        )
        g.check(retained, "the job never RETAINED with its owner's recovery failing")
        g.fleet.lose_host()
        adopted = wait_until(lambda: any("adopted by" in t for t in _log(g, j.job_id)), 90, 0.5)
        g.check(adopted, "the retained job was not adopted within 90 s of its host's loss")
        g.fleet.emu("faults", "clear", "ls")  # the Contents API answers again
        stuck = settle(g, [j])
        admin.clear_faults()
    rec = g.fleet.ledger.get(j.job_id)
    report = json.loads(rec.get("report") or "{}")
    where = str(report.get("results_local") or "")
    beat_state = Path(g.beat_env()["COLABQ_STATE_DIR"])
    local = Path(where.split(":", 1)[-1]) if where else None
    g.check(local is not None and local.is_relative_to(beat_state),
            f"results recovered to {where or 'nowhere'}, not the adopter's host")  # fmt: skip
    g.check(report.get("remaining_endpoint") is None, "the report names a VM still held")
    return stuck, "1 retained VM adopted after its host was lost", notes


# --- tokens that expire under running jobs ----------------------------------------------------


def token_expiry(g: Group) -> Result:
    lines = 120  # 0.25 s apart: ~30 s, five token lifetimes
    plain = g.submit("tokens expire under it", numbered(lines, 0.25), lines=lines)
    stuck = settle(g, [plain])
    j = g.submit("attach after its token expired", numbered(lines, 0.25), lines=lines)
    notes = []
    if wait_until(lambda: "line-30" in g.fleet.output(j.job_id), POINT_TIMEOUT_S):
        # The next attach reaches the proxy only after its token expired: 401, record pruned.
        fault(g, "exec", delay_s=6.5, times=1)
        for p in find(Target.ATTACH_CLIENT, g.fleet.job_dir(j.job_id), g.fleet.proc.pid):
            with suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
    else:
        notes.append("point not caught: line-30")
    stuck |= settle(g, [j])
    g.fleet.emu("faults", "clear")
    again = any("record written again" in t for t in _log(g, j.job_id))
    g.check(again, "the pruned record was not written again (the 401 path not taken?)")
    return stuck, "2 jobs over ~5 token lifetimes each, 1 attach after expiry", notes
