"""The files one job keeps on its worker host, shared by the runner, the watchdog and the exec
client, so that any of them can die and the others (or a restarted worker) carry on.

    <state_dir>/jobs/<job>/
        watch.json          what the watchdog enforces (written before it starts; re-read each
                            poll, so a new segment or owner updates it)
        runner.json         the owner's phase, its beat and the attach client (atomic rewrites)
        endpoints/<name>    each session's endpoint, recorded the moment it is seen (fsynced)
        watchdog.json       the watchdog's pid and heartbeat
        gone.json           the watchdog verified the session gone (and killed its clients)
        attach.json         what the current attach client reads: session, nonce, segment
        attach-result.json  what the last attach client saw when it ended
        colab-sessions.json the colab CLI's own state for this job (its --config)
        results/            results recovered from a retained VM

Writes are atomic (temp file + rename) so a reader never sees half a file; only the endpoint,
which a lost write would cost a VM, is fsynced.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from worker.records import ids
from worker.session.watchpolicy import Phase


def write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def process_start_ticks(pid: int) -> int | None:
    """The kernel's start time of `pid` (clock ticks since boot): with the pid, an identity that
    survives pid reuse. None if there is no such live process (a zombie counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


@dataclass(frozen=True)
class ProcRef:
    pid: int
    start_ticks: int

    @classmethod
    def of(cls, pid: int) -> ProcRef | None:
        ticks = process_start_ticks(pid)
        return cls(pid, ticks) if ticks is not None else None

    def alive(self) -> bool:
        return process_start_ticks(self.pid) == self.start_ticks


@dataclass(frozen=True)
class WatchSpec:
    job_id: str
    session: str
    colab_bin: str
    config_path: str
    wall_deadline_at: float  # epoch seconds, counted from before allocation
    idle_timeout_s: float
    poll_s: float
    remote_job_dir: str  # where the wrapper keeps logs and results on the VM
    # The VM heartbeat: where it is, and how old it may be and still mean "the job runs".
    heartbeat_path: str = ""
    heartbeat_stale_s: float = 60.0
    # The owner's beat in runner.json older than this: its phase no longer counts as busy.
    owner_stale_s: float = 30.0


@dataclass(frozen=True)
class RunnerState:
    phase: Phase
    runner: ProcRef | None
    client: ProcRef | None
    beat_at: float = 0.0  # the owner's last sign of life (its lease thread, while it runs)


class JobFiles:
    def __init__(self, root: Path) -> None:
        self.root = root

    def ensure(self) -> JobFiles:
        self.root.mkdir(parents=True, exist_ok=True)
        return self

    @property
    def cli_config(self) -> Path:
        return self.root / "colab-sessions.json"

    @property
    def attach_spec(self) -> Path:
        return self.root / "attach.json"

    @property
    def attach_result(self) -> Path:
        return self.root / "attach-result.json"

    @property
    def results(self) -> Path:
        return self.root / "results"

    @property
    def recover_lock(self) -> Path:
        return self.root / "recover.lock"

    # --- watch spec -------------------------------------------------------------------------

    def write_watch(self, spec: WatchSpec) -> None:
        # Not fsynced: the watchdog that reads it dies with the host a lost write would take.
        write_json(self.root / "watch.json", asdict(spec))

    def read_watch(self) -> WatchSpec | None:
        d = read_json(self.root / "watch.json")
        return WatchSpec(**d) if d else None

    # --- runner state -----------------------------------------------------------------------

    def write_runner(
        self, phase: Phase, *, client: ProcRef | None = None, clear_client: bool = False
    ) -> None:
        cur = self.read_runner()
        if not clear_client:
            client = client or (cur.client if cur else None)
        me = ProcRef.of(os.getpid())
        self._write_runner(RunnerState(phase, me, None if clear_client else client, time.time()))

    def beat_runner(self, at: float) -> None:
        """The owner is alive and acting: refresh its beat, keeping phase and client."""
        cur = self.read_runner()
        if cur is not None:
            self._write_runner(replace(cur, beat_at=at))

    def _write_runner(self, st: RunnerState) -> None:
        write_json(
            self.root / "runner.json",
            {
                "phase": st.phase.value,
                "runner": asdict(st.runner) if st.runner else None,
                "client": asdict(st.client) if st.client else None,
                "beat_at": st.beat_at,
            },
        )

    def read_runner(self) -> RunnerState | None:
        d = read_json(self.root / "runner.json")
        if not d:
            return None
        return RunnerState(
            Phase(d["phase"]),
            ProcRef(**d["runner"]) if d.get("runner") else None,
            ProcRef(**d["client"]) if d.get("client") else None,
            float(d.get("beat_at") or 0.0),
        )

    # --- endpoints --------------------------------------------------------------------------

    def record_endpoint(self, session: str, endpoint: str) -> None:
        """Write once, fsynced: the endpoint is how a session is found and stopped later.
        ValueError for a name or endpoint outside their grammars (`ids`): nothing written."""
        if ids.session(session) is None or ids.endpoint(endpoint) is None:
            raise ValueError(f"no session {ids.shown(session)} at {ids.shown(endpoint)}")
        path = self.root / "endpoints" / session
        if path.exists():
            return
        path.parent.mkdir(exist_ok=True)
        tmp = path.with_name(f".{session}.{os.getpid()}.tmp")
        with open(tmp, "w") as f:
            f.write(endpoint)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def endpoint(self, session: str) -> str | None:
        if ids.session(session) is None:
            return None
        try:
            return ids.endpoint((self.root / "endpoints" / session).read_text().strip())
        except OSError:
            return None

    # --- what the watchdog found ------------------------------------------------------------

    def mark_gone(self, session: str, at: float) -> None:
        """The watchdog verified the session gone (whoever ended it)."""
        write_json(self.root / "gone.json", {"session": session, "at": at})

    def gone(self, session: str) -> bool:
        d = read_json(self.root / "gone.json")
        return bool(d and d.get("session") == session)

    # --- watchdog ---------------------------------------------------------------------------

    def write_watchdog(self, heartbeat_at: float, last: str) -> None:
        me = ProcRef.of(os.getpid())
        write_json(
            self.root / "watchdog.json",
            {"proc": asdict(me) if me else None, "heartbeat_at": heartbeat_at, "last": last},
        )

    def watchdog(self) -> tuple[ProcRef | None, float, str]:
        d = read_json(self.root / "watchdog.json") or {}
        proc = ProcRef(**d["proc"]) if d.get("proc") else None
        return proc, float(d.get("heartbeat_at", 0.0)), str(d.get("last", ""))
