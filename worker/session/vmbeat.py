"""The wrapper's heartbeat file on the VM, read from the worker host with `colab download`.

The Contents API answers while the kernel is busy, so this works whatever runs in the kernel and
whichever exec client lives or died. What it says decides "busy on the VM" for the watchdog
(`watchpolicy.Vm`) and shows the follow loop an attach client that stopped receiving output
(the VM's console holds more than was forwarded).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from worker.colab.driver import ColabDriver
from worker.errors import RemotePathNotFound
from worker.session.watchpolicy import Vm


@dataclass(frozen=True)
class VmBeat:
    at: float  # the VM's clock (NTP's, like ours)
    phase: str  # starting, uploading, preparing (the code), running, finishing, done, kept
    console_bytes: int

    def state(self, now: float, stale_s: float) -> Vm:
        if self.phase == "done":
            return Vm.FINISHED
        if self.phase == "kept":
            return Vm.KEPT
        return Vm.RUNNING if now - self.at <= stale_s else Vm.SILENT


def parse_beat(text: str) -> VmBeat | None:
    try:
        d = json.loads(text)
        return VmBeat(float(d["at"]), str(d["phase"]), int(d.get("console_bytes", 0)))
    except (ValueError, KeyError, TypeError):
        return None


def read_beat(driver: ColabDriver, session: str, remote: str, timeout_s: float) -> VmBeat | None:
    """The heartbeat, or None if there is none (the wrapper never started). Any other failure
    raises (a ColabError): never read as "nothing runs"."""
    with tempfile.TemporaryDirectory(prefix="colabq-beat-") as tmp:
        local = Path(tmp) / "heartbeat"
        try:
            driver.download(session, remote, local, timeout_s=timeout_s)
        except RemotePathNotFound:
            return None
        return parse_beat(local.read_text())
