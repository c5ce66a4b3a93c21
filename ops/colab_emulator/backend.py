"""The emulated Google side: assignments, compute-unit billing and PyPI's "latest version".

State is `$COLAB_EMU_HOME/server.json` under `server.lock`. Billing is settled lazily: each
assignment carries `billed_until`; every mutation charges the time since then, at the
accelerator's hourly rate scaled by `time_scale` (so tests can make an hour pass in a second).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from .ids import random_hex, random_token
from .jsonfile import locked, read_json, write_json
from .vm import create_vm, destroy_vm

RATES_PER_HOUR = {
    "NONE": 0.07,
    "T4": 1.76,
    "L4": 4.82,
    "G4": 5.30,
    "A100": 11.77,
    "H100": 15.04,
    "V5E1": 4.13,
    "V6E1": 5.56,
}
START_BALANCE = 100.0
ENDPOINT_PREFIX = {"DEFAULT": "cpu", "GPU": "gpu", "TPU": "tpu"}
TOKEN_LIFETIME_S = 3600


class CcuInfo(NamedTuple):
    balance: float
    rate_per_hour: float
    assignments: int


class Backend:
    def __init__(
        self, emu_home: Path, time_scale: float = 1.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.emu_home = emu_home
        self.time_scale = time_scale
        self.clock = clock
        self.state_path = emu_home / "server.json"
        self.lock_path = emu_home / "server.lock"

    def _load(self) -> dict[str, Any]:
        state = read_json(self.state_path, {})
        if not isinstance(state, dict):
            state = {}
        state.setdefault("balance", START_BALANCE)
        state.setdefault("assignments", {})
        state.setdefault("latest_version", None)
        return state

    def _charge(self, assignment: Mapping[str, Any], now: float) -> float:
        hours = max(0.0, now - float(assignment["billed_until"])) * self.time_scale / 3600
        return RATES_PER_HOUR.get(assignment["accelerator"], 0.0) * hours

    def _settle(self, state: dict[str, Any], now: float) -> None:
        for assignment in state["assignments"].values():
            state["balance"] = state["balance"] - self._charge(assignment, now)
            assignment["billed_until"] = now

    def assign(
        self, variant: str, accelerator: str, machine_shape: str, environ: Mapping[str, str]
    ) -> dict[str, Any]:
        """Publish a new assignment and boot its VM (folder and runtime server)."""
        endpoint = f"{ENDPOINT_PREFIX[variant]}-{random_hex(10)}"
        now = self.clock()
        assignment = {
            "endpoint": endpoint,
            "variant": variant,
            "accelerator": accelerator,
            "machine_shape": machine_shape,
            "assigned_at": datetime.fromtimestamp(now, UTC).isoformat(),
            "billed_until": now,
            "token": random_token(24),
            "url": f"https://8080-{endpoint}.prod.colab.dev",
        }
        with locked(self.lock_path):
            state = self._load()
            self._settle(state, now)
            state["assignments"][endpoint] = assignment
            write_json(self.state_path, state)
        create_vm(self.emu_home, endpoint, environ)
        return assignment

    def list_assignments(self) -> list[dict[str, Any]]:
        with locked(self.lock_path, shared=True):
            state = self._load()
        return sorted(state["assignments"].values(), key=_ts)

    def get(self, endpoint: str) -> dict[str, Any] | None:
        with locked(self.lock_path, shared=True):
            found = self._load()["assignments"].get(endpoint)
        return dict(found) if found else None

    def unassign(self, endpoint: str, *, exclude_pid: int | None = None) -> bool:
        """Remove the assignment, then kill the VM's processes; False if it was not assigned."""
        with locked(self.lock_path):
            state = self._load()
            self._settle(state, self.clock())
            existed = state["assignments"].pop(endpoint, None) is not None
            write_json(self.state_path, state)
        destroy_vm(self.emu_home, endpoint, exclude_pid=exclude_pid)
        return existed

    def ccu_info(self) -> CcuInfo:
        now = self.clock()
        with locked(self.lock_path, shared=True):
            state = self._load()
        live = list(state["assignments"].values())
        balance = state["balance"] - sum(self._charge(a, now) for a in live)
        rate = sum(RATES_PER_HOUR.get(a["accelerator"], 0.0) for a in live)
        return CcuInfo(balance=max(0.0, balance), rate_per_hour=rate, assignments=len(live))

    def set_balance(self, balance: float) -> None:
        with locked(self.lock_path):
            state = self._load()
            self._settle(state, self.clock())
            state["balance"] = float(balance)
            write_json(self.state_path, state)

    def latest_version(self) -> str | None:
        with locked(self.lock_path, shared=True):
            latest = self._load()["latest_version"]
        return latest if isinstance(latest, str) and latest else None

    def set_latest_version(self, version: str | None) -> None:
        with locked(self.lock_path):
            state = self._load()
            state["latest_version"] = version or None
            write_json(self.state_path, state)


def _ts(assignment: Mapping[str, Any]) -> str:
    return str(assignment.get("assigned_at", ""))
