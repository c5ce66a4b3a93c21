"""Jobs and their owners: an owned job's id ends in `.<user>` (the package's docstring says
why), and who may change a job. Pure: no Redis call here.
"""

from __future__ import annotations

import secrets

from worker.people.identity import Identity

SEPARATOR = "."


def new_job_id(owner: str | None) -> str:
    """A new job id: 16 hex digits, then `.<owner>` under ACLs."""
    base = secrets.token_hex(8)
    return f"{base}{SEPARATOR}{owner}" if owner else base


def owner_of(job_id: str) -> str | None:
    """The ACL user whose namespace holds `job_id`; None for a job submitted without ACLs."""
    _, sep, owner = job_id.partition(SEPARATOR)
    return owner if sep else None


def is_mine(identity: Identity, job_id: str) -> bool:
    """Whether `identity` owns `job_id` (without ACLs everyone may change every job)."""
    return not identity.acl or owner_of(job_id) == identity.user


def after_refusal(job_id: str) -> str:
    """The one line that refuses a dependency on another user's job."""
    owner = owner_of(job_id) or "no ACL user"
    return f"--after {job_id}: job {job_id} belongs to {owner}; --after names your own jobs."


def refusal(identity: Identity, job_id: str, verb: str) -> str:
    """The one line that refuses `verb` on another user's job."""
    owner = owner_of(job_id) or "no ACL user (it was submitted without ACLs)"
    return (
        f"Job {job_id} belongs to {owner}, not to you ({identity.user}): only its owner or an "
        f"operator may {verb} it (an operator's Redis user is made with `colabq acl NAME "
        "--operator`)."
    )
