"""This host's account: the login `colab whoami` reports, checked against the `account` setting.

A worker runs `host_account` as it starts (`worker.session.checks`): a mismatch, or a login
whoami cannot name, keeps it from starting (or keeps a drained one drained) with one line. An
adopter runs it before it takes a job that recorded an account: a host on another login never
acts on that job's VM.
"""

from __future__ import annotations

from pathlib import Path

from worker.colab.driver import ColabCli
from worker.errors import ColabqError
from worker.settings import Settings


class AccountMismatch(ColabqError, PermissionError):
    """This host's CLI is logged in as another account than the one it must act as."""

    def __init__(self, message: str, *, found: str, wanted: str) -> None:
        super().__init__(message)
        self.found, self.wanted = found, wanted


def host_account(settings: Settings, driver: ColabCli | None = None) -> str:
    """The account this host's CLI is logged in as (`colab whoami`); AccountMismatch when the
    `account` setting names another. Raises the driver's ColabError when whoami fails."""
    if driver is None:
        from worker.deps import driver_at

        driver = driver_at(settings, _readiness_config(settings))
    found = driver.whoami()
    if settings.account is not None and found != settings.account:
        raise AccountMismatch(
            f"the colab CLI is logged in as {found}, not COLABQ_ACCOUNT={settings.account}: log "
            f"it in as {settings.account} (`colab whoami` shows the login), or set "
            f"COLABQ_ACCOUNT={found}",
            found=found, wanted=settings.account,
        )  # fmt: skip
    return found


def check_may_act(job_id: str, recorded: str | None, settings: Settings) -> None:
    """Before a host acts on a job's VM: AccountMismatch unless this host holds the job's
    account (a job that recorded none, from before accounts, is anyone's)."""
    if not recorded:
        return
    mine = host_account(settings)
    if mine != recorded:
        raise AccountMismatch(
            f"job {job_id}'s VM is on Colab account {recorded}; this host is logged in as "
            f"{mine}: act on it from a host of {recorded} (its janitor does so by itself)",
            found=mine, wanted=recorded,
        )  # fmt: skip


def _readiness_config(settings: Settings) -> Path:
    return settings.state_dir / "readiness" / "colab-sessions.json"
