"""What a failed or killed `colab new` left under its name (`worker.session.reconcile`): every
answer of `colab status -s NAME` and `colab sessions`, with and without the endpoint the watchdog
handed over. (On the emulator, through the driver and a worker: tests/integration/
test_driver_emulator.py, test_cli_releases.py, test_runner_faults.py.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from worker.colab.parse import LocalRecord, ServerSession, SessionStatus
from worker.errors import ColabTransportError
from worker.session.reconcile import Found, Reconciled, reconcile_new

BROKEN = ColabTransportError("colab status: requests.exceptions.ConnectionError: ...")


@dataclass
class Cli:
    """`status`, `sessions` and the local record, as the reconciliation reads them."""

    status_is: SessionStatus | Exception | None = None
    sessions_are: list[ServerSession] | Exception = field(default_factory=list)
    record: str | None = None
    config_path: Path = Path("/nonexistent/sessions.json")

    def status(self, name: str) -> SessionStatus | None:
        if isinstance(self.status_is, Exception):
            raise self.status_is
        return self.status_is

    def sessions(self) -> list[ServerSession]:
        if isinstance(self.sessions_are, Exception):
            raise self.sessions_are
        return self.sessions_are

    def local_record(self, name: str) -> LocalRecord | None:
        return LocalRecord(name, self.record, None) if self.record else None


def live(endpoint: str) -> SessionStatus:
    return SessionStatus("n", endpoint, "T4", "Standard", "GPU", False, None, None)


def listed(name: str | None, endpoint: str) -> ServerSession:
    return ServerSession(name, endpoint, "T4", "Standard", "GPU")


@pytest.mark.parametrize(
    ("cli", "handed_over", "expected", "lines"),
    [
        # The name's VM is live: adopted (whether or not the watchdog saw it first).
        (Cli(live("gpu-1")), None, Reconciled(Found.ADOPTED, "gpu-1"), 0),
        (Cli(live("gpu-1")), "gpu-1", Reconciled(Found.ADOPTED, "gpu-1"), 0),
        # Live, but not where the watchdog saw it: never adopted; the handed-over one released.
        (Cli(live("gpu-2")), "gpu-1", Reconciled(Found.UNKNOWN, "gpu-1"), 1),
        # status fails: unknown; the endpoint handed over, else the CLI's record, is released.
        (Cli(BROKEN, record="gpu-3"), "gpu-1", Reconciled(Found.UNKNOWN, "gpu-1"), 1),
        (Cli(BROKEN, record="gpu-3"), None, Reconciled(Found.UNKNOWN, "gpu-3"), 1),
        (Cli(BROKEN), None, Reconciled(Found.UNKNOWN, None), 1),
        # Nothing under the name; unnamed assignments are reported, named ones are others'.
        (Cli(None, [listed(None, "gpu-9"), listed("mine", "gpu-8")]), None,
         Reconciled(Found.NOTHING, None, ("gpu-9 (T4)",)), 0),
        (Cli(None, []), "gpu-1", Reconciled(Found.NOTHING), 0),
        (Cli(None, BROKEN), None, Reconciled(Found.NOTHING), 1),
    ],
)  # fmt: skip
def test_what_a_failed_new_left_is_found_by_name(
    cli: Cli, handed_over: str | None, expected: Reconciled, lines: int
) -> None:
    said: list[str] = []
    assert reconcile_new(cli, "n", handed_over, said.append) == expected  # type: ignore[arg-type]
    assert len(said) == lines, said
