"""The second witness to a session the CLI says is gone.

`colab status -s NAME` answers "not found" both when the VM went away and when the CLI only
pruned its local record: 0.7.4 deletes the record of a live VM whose runtime proxy answered
404/401 ("appears to be lost (404/401). Cleaning up."), e.g. a command whose proxy token
expired on its way to the proxy. So "not found" alone never makes a VM lost: the account's
assignments (`colab sessions`, server-side) are asked too. If they still list the session's
recorded endpoint, the VM is there: its record is written again, as an adopter writes one (the
CLI refreshes the proxy token from the assignments list on the record's next use), and the
session goes on. This module only finds and restores; callers decide what a gone VM means.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from worker.colab.driver import ColabDriver
from worker.colab.records import write_adoption_record
from worker.errors import ColabError, ColabqError


class Witness(StrEnum):
    GONE = "gone"  # the account no longer holds the endpoint: the VM is gone
    RESTORED = "restored"  # the VM is there; its record is back in the CLI's state
    UNKNOWN = "unknown"  # the assignments could not be read: not gone, ask again later


def confirm_gone(
    driver: ColabDriver, name: str, endpoint: str, log: Callable[[str], None]
) -> Witness:
    """After `status` said NAME is not found: is `endpoint` still assigned to the account?
    If so, write NAME's record at `endpoint` again (into the driver's `--config`)."""
    try:
        listed = driver.sessions()
    except ColabError as exc:
        log(f"{name} not found in the CLI's state, and `colab sessions` failed: {exc}")
        return Witness.UNKNOWN
    found = next((s for s in listed if s.endpoint == endpoint), None)
    if found is None:
        return Witness.GONE
    accelerator = "NONE" if found.hardware.upper() == "CPU" else found.hardware.upper()
    try:
        write_adoption_record(
            driver.config_path, name, endpoint,
            accelerator=accelerator, high_mem=found.shape == "High-RAM",
        )  # fmt: skip
    except (ColabqError, ValueError, OSError) as exc:
        log(f"{name} was pruned while {endpoint} is still assigned; its record: {exc}")
        return Witness.UNKNOWN
    log(
        f"the CLI pruned its record of {name} while {endpoint} is still assigned (its runtime "
        "proxy answered 404/401, e.g. an expired token): record written again, going on"
    )
    return Witness.RESTORED
