"""Whose VM a record names: the check every adopter and janitor passes before it acts on one.

A job's record names its session and endpoint, but a record is only as trustworthy as whoever
could write it (its owner, under ACLs; anyone, on a password-only deployment; an old or damaged
record). The endpoints index (`Keys.endpoints`, endpoint -> job id) is written by the job's
runner, watchdog and the services alone, in the same step that records the endpoint. So colabq
acts on a VM for a job only when the name is one of colabq's (its prefix and 128 random bits),
the endpoint is in the grammar (`ids`), and the index maps that endpoint to that very job. A
record that names another job's VM is refused, in one line, and nothing is done. Which account's
host may act is `worker.accounts.login`'s; the verified stop itself is `worker.colab.release`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from worker.errors import LedgerError
from worker.records import ids

if TYPE_CHECKING:
    from worker.records.ledger import Ledger


class NotTheJobsVm(LedgerError, PermissionError):
    """A job's record names a session or endpoint that is not the job's own."""

    def __init__(self, job_id: str, why: str) -> None:
        super().__init__(f"Job {job_id}'s record names a VM not its own ({why}): not acted on.")
        self.job_id, self.why = job_id, why

    hint = "An operator may compare the record with `colabq status JOB` and the endpoints index."


def vm_problem(
    job_id: str, name: str | None, endpoint: str | None, index_owner: str | None, prefix: str
) -> str | None:
    """Why the record's (`name`, `endpoint`) is not job `job_id`'s own VM, or None. Pure:
    `index_owner` is what the endpoints index maps `endpoint` to (None: nothing)."""
    if name is not None and ids.owned_session(name, prefix) is None:
        return f"session {ids.shown(name)} is not one of colabq's ({prefix}<32 hex>)"
    if endpoint is None:
        return None
    if ids.endpoint(endpoint) is None:
        return f"endpoint {ids.shown(endpoint)} is not an endpoint"
    if index_owner != job_id:
        owner = f"job {ids.shown(index_owner)}" if index_owner else "no job"
        return f"the endpoints index maps {endpoint} to {owner}"
    return None


def index_owner(ledger: Ledger, endpoint: str | None) -> str | None:
    """The job id the endpoints index maps `endpoint` to (None: none, or not a job id)."""
    if endpoint is None or ids.endpoint(endpoint) is None:
        return None
    return ids.job_id(ledger.r.hget(ledger.keys.endpoints(), endpoint))


def check_vm(
    ledger: Ledger, job_id: str, name: str | None, endpoint: str | None, prefix: str
) -> None:
    """NotTheJobsVm unless (`name`, `endpoint`), as job `job_id`'s record holds them, are its
    own (one HGET)."""
    why = vm_problem(job_id, name, endpoint, index_owner(ledger, endpoint), prefix)
    if why is not None:
        raise NotTheJobsVm(job_id, why)
