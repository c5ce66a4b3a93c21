"""This host's account: the login `colab whoami` reports, checked against the `account` setting.

`colab whoami` is a hidden debug command whose output is no contract: a login without the email
scope (as ADC can be) prints no email, and the command can fail where `colab new` works. So only a
whoami that names *another* account than COLABQ_ACCOUNT keeps a worker from starting (or keeps a
drained one drained), in one line; one that cannot name the login leaves COLABQ_ACCOUNT as the
host's account, with a warning (`Login.warning`), and without the setting the worker refuses,
asking for it. A worker runs `find_login` as it starts (`worker.session.checks`); an adopter runs
`host_account` before it takes a job that recorded an account: a host on another login never
acts on that job's VM.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from worker.colab.driver import ColabCli
from worker.errors import ColabError, ColabqError
from worker.settings import Settings


class AccountMismatch(ColabqError, PermissionError):
    """This host's CLI is logged in as another account than the one it must act as."""

    def __init__(self, message: str, *, found: str, wanted: str) -> None:
        super().__init__(message)
        self.found, self.wanted = found, wanted


class AccountUnknown(ColabqError, LookupError):
    """`colab whoami` cannot name the login and COLABQ_ACCOUNT is not set."""


@dataclass(frozen=True)
class Login:
    account: str
    # Set when `colab whoami` could not name the login and COLABQ_ACCOUNT stands in for it.
    warning: str | None = None


def find_login(settings: Settings, driver: ColabCli | None = None) -> Login:
    """The account this host acts as: the one `colab whoami` names (AccountMismatch when the
    `account` setting names another), else the setting, with a warning (AccountUnknown when
    there is none)."""
    if driver is None:
        from worker.deps import driver_at

        driver = driver_at(settings, _readiness_config(settings))
    try:
        found = driver.whoami()
        why = "it prints no email (a login without the userinfo.email scope, as ADC can be)"
    except ColabError as exc:
        found, why = None, f"it failed: {exc.advice()}"
    if found is None:
        if settings.account is None:
            raise AccountUnknown(
                f"`colab whoami` cannot name this host's Colab account ({why}): set "
                "COLABQ_ACCOUNT to the email of its Colab login (a worker records the account "
                "of every job it runs)"
            )
        warning = (
            f"`colab whoami` cannot name this host's Colab login ({why}); running as "
            f"COLABQ_ACCOUNT={settings.account}, which colabq cannot check"
        )
        return Login(settings.account, warning)
    if settings.account is not None and found != settings.account:
        raise AccountMismatch(
            f"the colab CLI is logged in as {found}, not COLABQ_ACCOUNT={settings.account}: log "
            f"it in as {settings.account} (`colab whoami` shows the login), or set "
            f"COLABQ_ACCOUNT={found}",
            found=found, wanted=settings.account,
        )  # fmt: skip
    return Login(found)


def host_account(settings: Settings, driver: ColabCli | None = None) -> str:
    """The account this host acts as (`find_login`), without its warning."""
    return find_login(settings, driver).account


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
