"""Which Hub token a job's uploads use on this worker host: chosen before allocation, by the
job's destination and its user together (`worker.people.destinations` holds the rule: a
destination's token for the users an operator listed, a user's own token for the places it can
write, the host's token for the users listed beside it).

The worker trusts no gate: its user is the owner in the job's id (an ACL user; a worker refuses
a job whose `submitted_by` is not its owner), else `submitted_by` as the submitting machine said.
A destination that tokens exist for but none serves the user ends the job before allocation, in
one line (`NotYourDestination`, the job's failure). A chosen file that is bad, or no token at
all where the job needs one, is this host's failure, named in one line (another host may hold
it); colabq never falls back to another user's token.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from worker.errors import ColabqError
from worker.people.destinations import (
    JobUser,
    NoHubToken,
    NotYourDestination,
    Scope,
    dest_key,
    user_key,
)
from worker.people.destinations import choose as choose_grant
from worker.people.owners import owner_of
from worker.settings import Settings
from worker.spec import JobSpec

__all__ = ["HubToken", "NoHubToken", "NotYourDestination", "choose", "dest_key", "user_key"]


def job_user(spec: JobSpec) -> JobUser:
    """The user the job's tokens must belong to, as this worker trusts it."""
    return JobUser.of(owner_of(spec.job_id), spec.submitted_by)


@dataclass(frozen=True)
class HubToken:
    """The token file a job's uploads use (None: no token applies), and whose it is."""

    path: Path | None
    whose: str  # "destination", "user", "host" or "none"
    expected: tuple[Path, ...] = ()  # every file looked for, most specific first

    def describe(self) -> str:
        """For the job's log: whose token, and its path (a path is never the secret)."""
        if self.path is None:
            return "no Hub token"
        return f"the {self.whose}'s Hub token ({self.path})"


def choose(spec: JobSpec, settings: Settings, scope: Scope | None = None) -> HubToken:
    """The job's token file, checked; NotYourDestination (the job's) or SecretFileError (this
    host's) in one line."""
    grant = choose_grant(job_user(spec), spec, settings, scope)
    return HubToken(grant.path, grant.whose, grant.expected)


def token_path(spec: JobSpec, settings: Settings, scope: Scope | None = None) -> Path | None:
    """The job's token file for this host's own Hub calls (its checks, its verification), or
    None; never raises (the pre-allocation check reports the problem)."""
    try:
        return choose(spec, settings, scope).path
    except (ColabqError, OSError):
        return None
