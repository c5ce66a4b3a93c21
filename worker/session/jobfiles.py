"""The files one job keeps on its worker host, shared by the runner, the watchdog and the exec
client, so that any of them can die and the others (or a restarted worker) carry on.

    <state_dir>/jobs/<job>/
        watch.json          what the watchdog enforces (written once, before it starts)
        runner.json         the runner's phase and the exec client's pid (rewritten atomically)
        endpoint            the assigned endpoint, recorded the moment it is seen (fsynced)
        watchdog.json       the watchdog's pid and heartbeat
        exec-result.json    what the exec client saw (sentinels, exit status)
        colab-sessions.json the colab CLI's own state for this job (its --config)
        results/            results recovered from a retained VM

Writes are atomic (temp file + rename) so a reader never sees half a file.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from worker.session.watchpolicy import Phase


def write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
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


@dataclass(frozen=True)
class RunnerState:
    phase: Phase
    runner: ProcRef | None
    client: ProcRef | None


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
    def exec_result(self) -> Path:
        return self.root / "exec-result.json"

    @property
    def results(self) -> Path:
        return self.root / "results"

    @property
    def recover_lock(self) -> Path:
        return self.root / "recover.lock"

    # --- watch spec -------------------------------------------------------------------------

    def write_watch(self, spec: WatchSpec) -> None:
        write_json(self.root / "watch.json", asdict(spec))

    def read_watch(self) -> WatchSpec | None:
        d = read_json(self.root / "watch.json")
        return WatchSpec(**d) if d else None

    # --- runner state -----------------------------------------------------------------------

    def write_runner(self, phase: Phase, *, client: ProcRef | None = None) -> None:
        cur = self.read_runner()
        client = client or (cur.client if cur else None)
        me = ProcRef.of(os.getpid())
        write_json(
            self.root / "runner.json",
            {
                "phase": phase.value,
                "runner": asdict(me) if me else None,
                "client": asdict(client) if client else None,
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
        )

    # --- endpoint ---------------------------------------------------------------------------

    def record_endpoint(self, endpoint: str) -> None:
        path = self.root / "endpoint"
        if path.exists():
            return
        tmp = self.root / f".endpoint.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(endpoint)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def endpoint(self) -> str | None:
        try:
            return (self.root / "endpoint").read_text().strip() or None
        except OSError:
            return None

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
