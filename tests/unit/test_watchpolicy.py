"""The watchdog's rules as a table: each case that must stop beside the ones that must not."""

from __future__ import annotations

import pytest

from worker.session.watchpolicy import HANDOVER_ERRORS, Act, Observation, Phase, Seen, Vm, decide

IDLE_S = 180.0
WALL_AT = 10_000.0
EP = "gpu-abc"


def obs(
    now: float = 1_000.0,
    phase: Phase = Phase.RUNNING,
    client: bool = False,
    runner: bool = True,
    endpoint: str | None = EP,
    seen: Seen = Seen.OURS,
    record: str | None = None,
    cancel: bool = False,
    vm: Vm = Vm.NOT_ASKED,
    cli: bool = False,
    errors: int = 0,
    unforwarded: bool = False,
) -> Observation:
    return Observation(
        now, phase, client, runner, endpoint, seen, record, cancel, vm, cli, errors, unforwarded
    )


# (case, observation, idle_since, expected act)
CASES = [
    ("client alive: busy", obs(client=True, seen=Seen.NOT_ASKED), None, Act.WAIT),
    (
        "client alive long ago idle_since ignored",
        obs(client=True, seen=Seen.NOT_ASKED),
        0.0,
        Act.WAIT,
    ),
    ("stale BUSY: client dead, timer just started", obs(seen=Seen.OURS), None, Act.WAIT),
    ("stale BUSY: idle one second short", obs(now=1_179.0), 1_000.0, Act.WAIT),
    ("stale BUSY: idle timeout reached", obs(now=1_180.0), 1_000.0, Act.STOP),
    (
        "uploads count as busy past the idle timeout",
        obs(phase=Phase.UPLOADING, now=5_000.0, seen=Seen.NOT_ASKED),
        1_000.0,
        Act.WAIT,
    ),
    (
        "allocating counts as busy",
        obs(phase=Phase.ALLOCATING, now=5_000.0, seen=Seen.NOT_ASKED),
        1_000.0,
        Act.WAIT,
    ),
    (
        "recovering counts as busy",
        obs(phase=Phase.RECOVERING, now=5_000.0, seen=Seen.NOT_ASKED),
        1_000.0,
        Act.WAIT,
    ),
    (
        "a dead runner's upload phase is not busy",
        obs(phase=Phase.UPLOADING, runner=False, now=5_000.0),
        1_000.0,
        Act.STOP,
    ),
    (
        "wall cap stops a busy session",
        obs(client=True, now=WALL_AT, seen=Seen.OURS),
        None,
        Act.STOP,
    ),
    (
        "before the wall cap a busy session runs on",
        obs(client=True, now=WALL_AT - 1, seen=Seen.NOT_ASKED),
        None,
        Act.WAIT,
    ),
    (
        "wall cap + status error + endpoint unchanged",
        obs(client=True, now=WALL_AT, seen=Seen.ERROR, record=EP),
        None,
        Act.STOP,
    ),
    (
        "wall cap + status error + endpoint changed",
        obs(client=True, now=WALL_AT, seen=Seen.ERROR, record="gpu-other"),
        None,
        Act.WAIT,
    ),
    (
        "wall cap + status error + no record",
        obs(client=True, now=WALL_AT, seen=Seen.ERROR, record=None),
        None,
        Act.WAIT,
    ),
    (
        "status error never counts as idle",
        obs(now=9_000.0, seen=Seen.ERROR, record=EP),
        1_000.0,
        Act.WAIT,
    ),
    ("endpoint mismatch: never stopped", obs(now=9_000.0, seen=Seen.MISMATCH), 1_000.0, Act.REPORT),
    (
        "endpoint mismatch at the wall cap: never stopped",
        obs(now=WALL_AT, seen=Seen.MISMATCH),
        1_000.0,
        Act.REPORT,
    ),
    ("gone: exit", obs(seen=Seen.GONE), None, Act.EXIT),
    (
        "never assigned while allocating: wait, touch nothing",
        obs(phase=Phase.ALLOCATING, endpoint=None, seen=Seen.NOT_ASKED, now=WALL_AT),
        None,
        Act.WAIT,
    ),
    (
        "never assigned and runner done: exit",
        obs(phase=Phase.DONE, endpoint=None, seen=Seen.NOT_ASKED),
        None,
        Act.EXIT,
    ),
    ("cancel stops a busy session", obs(client=True, cancel=True), None, Act.STOP),
    # Busy is decided on the VM when the host cannot tell.
    (
        "client dead, VM heartbeat fresh: busy past the idle timeout",
        obs(now=9_000.0, vm=Vm.RUNNING),
        1_000.0,
        Act.WAIT,
    ),
    ("client dead, VM silent: idle", obs(now=9_000.0, vm=Vm.SILENT), 1_000.0, Act.STOP),
    (
        "VM heartbeat unreadable: never counted as idle",
        obs(now=9_000.0, vm=Vm.ERROR),
        1_000.0,
        Act.WAIT,
    ),
    (
        "job finished and stored, no owner, no client: stop at once",
        obs(runner=False, vm=Vm.FINISHED),
        None,
        Act.STOP,
    ),
    (
        "job finished and stored, no owner, its console not all forwarded: an adopter may",
        obs(runner=False, vm=Vm.FINISHED, unforwarded=True),
        None,
        Act.WAIT,
    ),
    (
        "the same past the idle timeout: stopped (its log is in the store)",
        obs(now=9_000.0, runner=False, vm=Vm.FINISHED, unforwarded=True),
        1_000.0,
        Act.STOP,
    ),
    (
        "job finished and stored but its owner lives: the owner stops it",
        obs(vm=Vm.FINISHED),
        None,
        Act.WAIT,
    ),
    (
        "job finished, final upload failed: the idle timer, then a stop that recovers first",
        obs(runner=False, vm=Vm.KEPT),
        None,
        Act.WAIT,
    ),
    (
        "a live owner that is uploading is busy",
        obs(phase=Phase.UPLOADING, now=9_000.0),
        1_000.0,
        Act.WAIT,
    ),
    # Watchdogs always end.
    (
        "owner died before any endpoint, nothing allocating: exit",
        obs(phase=Phase.ALLOCATING, runner=False, endpoint=None, seen=Seen.NOT_ASKED),
        None,
        Act.EXIT,
    ),
    (
        "owner died before any endpoint but its `colab new` still runs: wait",
        obs(phase=Phase.ALLOCATING, runner=False, endpoint=None, seen=Seen.NOT_ASKED, cli=True),
        None,
        Act.WAIT,
    ),
    (
        "name at another endpoint, owner gone: handed to the janitor",
        obs(runner=False, seen=Seen.MISMATCH),
        None,
        Act.EXIT,
    ),
    (
        "status keeps failing after the job is over: handed to the janitor",
        obs(phase=Phase.DONE, runner=False, seen=Seen.ERROR, errors=HANDOVER_ERRORS),
        None,
        Act.EXIT,
    ),
    (
        "status failing while the job runs: keep the caps",
        obs(seen=Seen.ERROR, errors=50),
        None,
        Act.WAIT,
    ),
    (
        "cancel waits for recovery of the only copy",
        obs(phase=Phase.RECOVERING, cancel=True),
        None,
        Act.WAIT,
    ),
]


@pytest.mark.parametrize(("case", "o", "idle_since", "act"), CASES, ids=[c[0] for c in CASES])
def test_decide(case: str, o: Observation, idle_since: float | None, act: Act) -> None:
    d = decide(o, idle_since=idle_since, idle_timeout_s=IDLE_S, wall_deadline_at=WALL_AT)
    assert d.act is act, d.reason


def test_idle_timer_starts_when_client_exits_and_resets_when_busy() -> None:
    d1 = decide(obs(now=100.0), idle_since=None, idle_timeout_s=IDLE_S, wall_deadline_at=WALL_AT)
    assert d1.idle_since == 100.0
    d2 = decide(obs(now=200.0, client=True, seen=Seen.NOT_ASKED), idle_since=d1.idle_since,
                idle_timeout_s=IDLE_S, wall_deadline_at=WALL_AT)  # fmt: skip
    assert d2.idle_since is None
