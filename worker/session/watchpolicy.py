"""The watchdog's decisions, as a pure function of what it observed and the time.

The rules of `launcher.md`: busy means the exec client is alive, or the (living) runner is
allocating, uploading or recovering results; when nothing is busy an idle timer runs, even if
`colab status` still says BUSY (0.7.4 leaves a killed client's label stale); the wall cap is
unconditional; a session is stopped only when status shows our name at the recorded endpoint
(a status error never counts as idle, but at the wall cap a stop may proceed if the CLI's own
record still holds the recorded endpoint); an assignment never seen is never touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Phase(StrEnum):
    """What the runner says it is doing (written to the job's state file)."""

    CHECKING = "checking"
    ALLOCATING = "allocating"
    UPLOADING = "uploading"
    RUNNING = "running"
    FINISHING = "finishing"
    RECOVERING = "recovering"
    DONE = "done"


BUSY_PHASES = frozenset({Phase.CHECKING, Phase.ALLOCATING, Phase.UPLOADING, Phase.RECOVERING})


class Seen(StrEnum):
    """What `colab status -s NAME` said."""

    OURS = "ours"  # exactly one line for the name, at the recorded endpoint
    GONE = "gone"  # "Session 'NAME' not found."
    MISMATCH = "mismatch"  # the name is at another endpoint
    ERROR = "error"  # the call failed (timeout, traceback, unrecognised output)
    NOT_ASKED = "not_asked"  # no endpoint recorded yet: nothing to ask about


@dataclass(frozen=True)
class Observation:
    now: float
    phase: Phase
    client_alive: bool
    runner_alive: bool  # a phase counts as busy only while the runner that wrote it lives
    endpoint: str | None  # the endpoint recorded durably for this job
    seen: Seen
    record_endpoint: str | None  # the CLI's own local record for the name, read from its file
    cancel_requested: bool = False


class Act(StrEnum):
    WAIT = "wait"
    STOP = "stop"
    EXIT = "exit"  # nothing left to watch
    REPORT = "report"  # something is wrong that colabq must not act on; keep watching


@dataclass(frozen=True)
class Decision:
    act: Act
    reason: str
    idle_since: float | None  # the idle timer's start, carried to the next observation


def is_busy(obs: Observation) -> bool:
    return obs.client_alive or (obs.runner_alive and obs.phase in BUSY_PHASES)


def decide(
    obs: Observation, *, idle_since: float | None, idle_timeout_s: float, wall_deadline_at: float
) -> Decision:
    busy = is_busy(obs)
    idle = None if busy else (idle_since if idle_since is not None else obs.now)
    if obs.endpoint is None:
        # Never seen: never touched. Once the runner is done there is nothing to watch.
        if obs.phase is Phase.DONE:
            return Decision(Act.EXIT, "no session was ever assigned", idle)
        return Decision(Act.WAIT, "no endpoint recorded yet", idle)
    if obs.seen is Seen.GONE:
        return Decision(Act.EXIT, "session gone (verified by status)", idle)
    if obs.seen is Seen.MISMATCH:
        return Decision(Act.REPORT, f"name no longer at {obs.endpoint}: not stopping", idle)
    at_wall = obs.now >= wall_deadline_at
    if obs.seen is Seen.ERROR:
        if at_wall and obs.record_endpoint == obs.endpoint:
            return Decision(Act.STOP, "wall cap reached (status failed; endpoint unchanged)", idle)
        return Decision(Act.WAIT, "status failed: never counted as idle", idle)
    if obs.seen is Seen.NOT_ASKED:
        return Decision(Act.WAIT, "status not asked", idle)
    # Seen.OURS from here on.
    if at_wall:
        return Decision(Act.STOP, "wall cap reached", idle)
    if obs.cancel_requested and obs.phase is not Phase.RECOVERING:
        return Decision(Act.STOP, "cancel requested", idle)
    if idle is None:
        return Decision(Act.WAIT, "busy", idle)
    idle_s = obs.now - idle
    if idle_s >= idle_timeout_s:
        return Decision(Act.STOP, f"idle for {idle_s:.0f}s (timeout {idle_timeout_s:.0f}s)", idle)
    return Decision(Act.WAIT, f"idle for {idle_s:.0f}s", idle)
