"""The emulated Google side: assignments, compute-unit billing and PyPI's "latest version".

State is `$COLAB_EMU_HOME/server.json` under `server.lock`. Billing is settled lazily: each
assignment carries `billed_until`; every mutation charges the time since then, at the
accelerator's hourly rate scaled by `time_scale` (so tests can make an hour pass in a second).
The balance never goes below 0. When an assignment ends (by any route: stop, self-release,
`colab-emu unassign`, kill-all) one line is appended to `billing.jsonl`:
`{endpoint, accelerator, assigned_at, unassigned_at, seconds, units}` (epoch floats; `seconds` of
real time; `units` = rate x seconds x time_scale / 3600).

An assignment's `accelerator` is what the server gave, which may differ from what was asked
(`requested_accelerator`, kept only when it differs: the `new` fault `serve_gpu`); the bill, the
listing (`colab sessions`) and the VM's GPU follow what was given.

`account` (server.json) is the Google account the home stands for, what `colab whoami` prints
(`colab-emu set-account EMAIL`; absent: `DEFAULT_ACCOUNT`). Two accounts are two emulator homes.

`cuda_version` (server.json) is the driver CUDA every GPU VM assigned from now on reports
(`colab-emu set-cuda X.Y`; absent: nvidia_smi.CUDA_VERSION).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from .ids import random_hex, random_token
from .jsonfile import locked, read_json, write_json
from .nvidia_smi import CUDA_VERSION
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
# The Google account this emulator home stands for (`colab whoami`): one home, one account.
DEFAULT_ACCOUNT = "emulator@colab.example"
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
        self.billing_path = emu_home / "billing.jsonl"

    def _load(self) -> dict[str, Any]:
        state = read_json(self.state_path, {})
        if not isinstance(state, dict):
            state = {}
        state.setdefault("balance", START_BALANCE)
        state.setdefault("assignments", {})
        state.setdefault("latest_version", None)
        state.setdefault("cuda_version", CUDA_VERSION)
        return state

    def _charge(self, assignment: Mapping[str, Any], now: float) -> float:
        hours = max(0.0, now - float(assignment["billed_until"])) * self.time_scale / 3600
        return RATES_PER_HOUR.get(assignment["accelerator"], 0.0) * hours

    def _settle(self, state: dict[str, Any], now: float) -> None:
        for assignment in state["assignments"].values():
            state["balance"] = max(0.0, state["balance"] - self._charge(assignment, now))
            assignment["billed_until"] = now

    def _usage(self, assignment: Mapping[str, Any], until: float | None) -> dict[str, Any]:
        """The billing record of an assignment up to `until` (None: still open, up to now)."""
        started = _assigned_epoch(assignment)
        seconds = max(0.0, (until if until is not None else self.clock()) - started)
        rate = RATES_PER_HOUR.get(assignment["accelerator"], 0.0)
        return {
            "endpoint": assignment["endpoint"],
            "accelerator": assignment["accelerator"],
            "assigned_at": started,
            "unassigned_at": until,
            "seconds": seconds,
            "units": rate * seconds * self.time_scale / 3600,
        }

    def _append_billing(self, record: dict[str, Any]) -> None:
        with open(self.billing_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def assign(
        self,
        variant: str,
        accelerator: str,
        machine_shape: str,
        environ: Mapping[str, str],
        *,
        requested: str | None = None,
        nbh: str | None = None,
    ) -> dict[str, Any]:
        """Publish a new assignment of `accelerator` (the one served; `requested` if another
        was asked for) and boot its VM (folder, GPU and runtime server). `nbh` is the notebook
        hash of the request: a GET of the same hash finds the assignment (`by_notebook`)."""
        endpoint = f"{ENDPOINT_PREFIX[variant]}-{random_hex(10)}"
        now = self.clock()
        assignment = {
            "endpoint": endpoint,
            "variant": variant,
            "accelerator": accelerator,
            "machine_shape": machine_shape,
            "assigned_at": datetime.fromtimestamp(now, UTC).isoformat(),
            "assigned_epoch": now,
            "billed_until": now,
            "token": random_token(24),
            "url": f"https://8080-{endpoint}.prod.colab.dev",
        }
        if requested is not None and requested != accelerator:
            assignment["requested_accelerator"] = requested
        if nbh is not None:
            assignment["nbh"] = nbh
        with locked(self.lock_path):
            state = self._load()
            self._settle(state, now)
            state["assignments"][endpoint] = assignment
            write_json(self.state_path, state)
            cuda = str(state["cuda_version"])
        create_vm(self.emu_home, endpoint, environ, accelerator, cuda)
        return assignment

    def list_assignments(self) -> list[dict[str, Any]]:
        with locked(self.lock_path, shared=True):
            state = self._load()
        return sorted(state["assignments"].values(), key=_ts)

    def by_notebook(self, nbh: str) -> dict[str, Any] | None:
        """The live assignment made for notebook hash `nbh` (what `GET /tun/m/assign` answers
        with when the notebook is assigned already), or None."""
        return next((a for a in self.list_assignments() if a.get("nbh") == nbh), None)

    def get(self, endpoint: str) -> dict[str, Any] | None:
        with locked(self.lock_path, shared=True):
            found = self._load()["assignments"].get(endpoint)
        return dict(found) if found else None

    def unassign(self, endpoint: str, *, exclude_pid: int | None = None) -> bool:
        """Remove the assignment, then kill the VM's processes; False if it was not assigned."""
        with locked(self.lock_path):
            state = self._load()
            now = self.clock()
            self._settle(state, now)
            gone = state["assignments"].pop(endpoint, None)
            write_json(self.state_path, state)
            if gone is not None:
                self._append_billing(self._usage(gone, now))
        destroy_vm(self.emu_home, endpoint, exclude_pid=exclude_pid)
        return gone is not None

    def billing(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(records of ended assignments, in billing.jsonl order; open ones, seconds so far)."""
        closed = []
        try:
            with open(self.billing_path, encoding="utf-8") as fh:
                for line in fh:
                    try:
                        closed.append(json.loads(line))
                    except ValueError:
                        continue
        except OSError:
            pass
        return closed, [self._usage(a, None) for a in self.list_assignments()]

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

    def account(self) -> str:
        return self._text("account") or DEFAULT_ACCOUNT

    def set_account(self, email: str) -> None:
        self._store("account", email)

    def latest_version(self) -> str | None:
        return self._text("latest_version")

    def set_cuda_version(self, version: str) -> None:
        """The driver CUDA of GPU VMs assigned from now on."""
        self._store("cuda_version", version)

    def set_latest_version(self, version: str | None) -> None:
        self._store("latest_version", version or None)

    def _text(self, key: str) -> str | None:
        """A text value of server.json; None when absent or empty."""
        with locked(self.lock_path, shared=True):
            value = self._load().get(key)
        return value if isinstance(value, str) and value else None

    def _store(self, key: str, value: object) -> None:
        with locked(self.lock_path):
            state = self._load()
            state[key] = value
            write_json(self.state_path, state)


def _ts(assignment: Mapping[str, Any]) -> str:
    return str(assignment.get("assigned_at", ""))


def _assigned_epoch(assignment: Mapping[str, Any]) -> float:
    if isinstance(assignment.get("assigned_epoch"), int | float):
        return float(assignment["assigned_epoch"])
    try:
        return datetime.fromisoformat(str(assignment.get("assigned_at"))).timestamp()
    except ValueError:
        return float(assignment.get("billed_until", 0.0))
