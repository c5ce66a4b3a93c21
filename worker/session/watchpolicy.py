"""The watchdog's decisions, as a pure function of what it observed and the time.

The rules of `launcher.md`, as colabq refines them (the run lives on the VM):
- Busy means: the attach client is alive; or the owner (runner or adopter) is alive, its beat is
  fresh and it is allocating, uploading or recovering results (a stale phase is not busy); or,
  with neither, the wrapper's heartbeat on the VM is fresh and says the job still runs (a dead
  client never starts the idle timer while the job runs). An owner waiting out a Redis outage
  is alive but not busy: only the VM's heartbeat keeps its session, so an outage of any length
  never stops a job that runs, and never keeps an idle VM past its timeout. `colab status`'s
  BUSY is never used (0.7.4 leaves a killed client's label stale).
- When nothing is busy an idle timer runs; past `idle_timeout_s` the session is stopped. A job
  that finished with its results stored and no owner left to release the VM is stopped at once,
  once its console is all in its log stream (else at the idle timeout: an adopter forwards it).
- The wall cap is unconditional.
- A session is stopped only when status shows our name at the recorded endpoint; a status error
  never counts as idle, but at the wall cap a stop may proceed if the CLI's own record still
  holds the recorded endpoint. An assignment never seen is never touched.
- The watchdog always ends: when the session is verified gone; when no session was ever
  assigned and nothing can still assign one; when the name moved to another endpoint or status
  keeps failing after the job is over (handed to the janitor, which reconciles the account).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Phase(StrEnum):
    """What the job's owner says it is doing (written to the job's runner.json)."""

    CHECKING = "checking"
    ALLOCATING = "allocating"
    UPLOADING = "uploading"
    RUNNING = "running"
    FINISHING = "finishing"
    RECOVERING = "recovering"
    DONE = "done"
    HANDED_OVER = "handed_over"  # the owner stopped acting (another owner holds the job)
    # Alive, acting on nothing until Redis answers: not busy (the VM says whether the job runs),
    # not over (a finished job's VM is left to the idle timeout, so the owner can still forward
    # the rest of its console when Redis is back).
    AWAITING_REDIS = "awaiting_redis"


BUSY_PHASES = frozenset({Phase.CHECKING, Phase.ALLOCATING, Phase.UPLOADING, Phase.RECOVERING})
OVER_PHASES = frozenset({Phase.DONE, Phase.HANDED_OVER})
# Status failing this many polls in a row after the job is over: the janitor takes it from here.
HANDOVER_ERRORS = 4


class Seen(StrEnum):
    """What `colab status -s NAME` said."""

    OURS = "ours"  # exactly one line for the name, at the recorded endpoint
    GONE = "gone"  # "Session 'NAME' not found."
    MISMATCH = "mismatch"  # the name is at another endpoint
    ERROR = "error"  # the call failed (timeout, traceback, unrecognised output)
    NOT_ASKED = "not_asked"  # no endpoint recorded yet: nothing to ask about


class Vm(StrEnum):
    """What the wrapper's heartbeat file on the VM said."""

    RUNNING = "running"  # fresh, and the job (or its uploads) still runs
    FINISHED = "finished"  # the wrapper is done and its final upload succeeded
    KEPT = "kept"  # the wrapper is done but its final upload failed: the VM holds the results
    SILENT = "silent"  # no heartbeat, or a stale one: nothing of the job runs there
    ERROR = "error"  # could not be read (never counted as idle)
    NOT_ASKED = "not_asked"


@dataclass(frozen=True)
class Observation:
    now: float
    phase: Phase
    client_alive: bool
    owner_alive: bool  # the owner's process lives, its beat is fresh, and it is not over
    endpoint: str | None  # the endpoint recorded durably for this session
    seen: Seen
    record_endpoint: str | None  # the CLI's own local record for the name, read from its file
    cancel_requested: bool = False
    vm: Vm = Vm.NOT_ASKED
    cli_running: bool = False  # a `colab` call on this job's CLI state is alive (e.g. `new`)
    status_errors: int = 0  # consecutive failed status calls, this one included
    # The job finished with no owner, and its console is not all in its log stream (or that is
    # not known): an adopter may still forward it, so its VM waits for the idle timeout.
    unforwarded: bool = False


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


def owner_busy(obs: Observation) -> bool:
    return obs.owner_alive and obs.phase in BUSY_PHASES


def is_busy(obs: Observation) -> bool:
    """Busy without asking the VM: the client, or an owner in a busy phase."""
    return obs.client_alive or owner_busy(obs)


def needs_vm_heartbeat(obs: Observation) -> bool:
    """Read the VM's heartbeat only when the host alone cannot tell that the job runs."""
    return obs.endpoint is not None and not is_busy(obs)


def decide(
    obs: Observation, *, idle_since: float | None, idle_timeout_s: float, wall_deadline_at: float
) -> Decision:
    busy = is_busy(obs) or obs.vm in (Vm.RUNNING, Vm.ERROR)
    idle = None if busy else (idle_since if idle_since is not None else obs.now)
    over = obs.phase in OVER_PHASES or not obs.owner_alive
    if obs.endpoint is None:
        # Never seen: never touched. Once nothing can assign one any more, nothing to watch.
        if obs.phase in OVER_PHASES or not (obs.owner_alive or obs.cli_running):
            return Decision(Act.EXIT, "no session was ever assigned", idle)
        return Decision(Act.WAIT, "no endpoint recorded yet", idle)
    if obs.seen is Seen.GONE:
        return Decision(Act.EXIT, "session gone (verified by status)", idle)
    if obs.seen is Seen.MISMATCH:
        if over:
            return Decision(
                Act.EXIT, f"name no longer at {obs.endpoint}: handed to the janitor", idle
            )
        return Decision(Act.REPORT, f"name no longer at {obs.endpoint}: not stopping", idle)
    at_wall = obs.now >= wall_deadline_at
    if obs.seen is Seen.ERROR:
        if at_wall and obs.record_endpoint == obs.endpoint:
            return Decision(Act.STOP, "wall cap reached (status failed; endpoint unchanged)", idle)
        if obs.phase in OVER_PHASES and obs.status_errors >= HANDOVER_ERRORS:
            return Decision(Act.EXIT, "status keeps failing: handed to the janitor", idle)
        return Decision(Act.WAIT, "status failed: never counted as idle", idle)
    if obs.seen is Seen.NOT_ASKED:
        return Decision(Act.WAIT, "status not asked", idle)
    # Seen.OURS from here on.
    if at_wall:
        return Decision(Act.STOP, "wall cap reached", idle)
    if obs.cancel_requested and obs.phase is not Phase.RECOVERING:
        return Decision(Act.STOP, "cancel requested", idle)
    # A finished job's VM with no owner left is stopped at once, once its console is all in its
    # log stream; else the idle timeout gives an adopter the time to forward the rest.
    finished = obs.vm is Vm.FINISHED and not (obs.client_alive or obs.owner_alive)
    if finished and not obs.unforwarded:
        return Decision(Act.STOP, "the job finished and its results are stored; no owner", idle)
    if idle is None:
        return Decision(Act.WAIT, "busy", idle)
    idle_s = obs.now - idle
    if idle_s >= idle_timeout_s:
        return Decision(Act.STOP, f"idle for {idle_s:.0f}s (timeout {idle_timeout_s:.0f}s)", idle)
    return Decision(Act.WAIT, f"idle for {idle_s:.0f}s", idle)
