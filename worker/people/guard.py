"""The commands' refusals: under ACLs a user who is not an operator changes only their own
jobs, and only operators and services act on workers. Redis refuses such writes anyway (the
package's docstring); this says so in one line, before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from worker.errors import UserInputError
from worker.people.acl import operator_probe_key
from worker.people.identity import may_write_others
from worker.people.owners import is_mine, refusal

if TYPE_CHECKING:
    from worker.records.ledger import Ledger


def is_operator(ledger: Ledger) -> bool:
    """No ACLs, or an ACL user Redis lets write outside its own jobs (operator, service)."""
    if not ledger.identity.acl:
        return True
    return may_write_others(ledger.r, operator_probe_key(ledger.keys.prefix))


def check_may_change(ledger: Ledger, job_ids: Iterable[str], verb: str) -> None:
    """Refuse (UserInputError, exit 2) `verb` on a job of someone else, unless an operator."""
    me = ledger.identity
    others = [j for j in job_ids if not is_mine(me, j)]
    if others and not is_operator(ledger):
        raise UserInputError(refusal(me, others[0], verb))


def mine_unless_operator(ledger: Ledger, job_ids: list[str]) -> list[str]:
    """What a filter selects that this user may change: every job for an operator (or without
    ACLs), else their own."""
    me = ledger.identity
    if all(is_mine(me, j) for j in job_ids) or is_operator(ledger):
        return job_ids
    return [j for j in job_ids if is_mine(me, j)]


def check_operator(ledger: Ledger, what: str) -> None:
    """Refuse `what` (a sentence's subject) to a user who is not an operator or a service."""
    if not is_operator(ledger):
        raise UserInputError(
            f"{what} needs an operator's Redis user (`colabq acl NAME --operator`); you are "
            f"{ledger.identity.user}."
        )
