"""Asking the gate (`worker.gate`): a request appended to this user's own stream, then its answer
waited for on this user's reply list. Every change a user makes to the queue goes this way
(submit, cancel, retry, clean's record); the commands print what they printed before.

A gate that holds its lease is waited for `gate_wait_s` (a setting); with no gate running, a
few seconds (a worker's duty takes a free lease within about two). Nobody answering is one line
(`GateSilent`): the request stays in the stream and is handled when a gate runs. What comes back
is validated (`wire.Reply`) like anything read from Redis.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar

from pydantic import ValidationError

from worker.errors import ColabqError, GateSilent, UserInputError
from worker.gate import wire

if TYPE_CHECKING:
    from worker.records.ledger import Ledger
    from worker.settings import Settings

# No gate holds the lease: how long a request is waited for before it is said to be kept.
NO_GATE_WAIT_S = 5.0
# Each blocking pop is shorter than the client's socket timeout (30 s).
_POP_S = 20.0

R = TypeVar("R", wire.Submitted, wire.Cancelled, wire.Retried, wire.Noted)


def ask(ledger: Ledger, body: wire.Body, expect: type[R], *, wait_s: float) -> R:
    """Send `body` as this process's Redis user and return the gate's answer; a refusal is
    raised as the error the gate raised (its one line)."""
    me = ledger.identity
    rid = secrets.token_hex(16)
    request = wire.Request(rid=rid, host=_label(me.host, 253), local_user=_label(me.local_user, 64),
                           body=body)  # fmt: skip
    pipe = ledger.r.pipeline(transaction=False)
    pipe.xadd(ledger.keys.requests(me.user), {"r": request.model_dump_json()})
    pipe.exists(ledger.keys.gate_lease())
    _, gate_live = pipe.execute()
    waited_s = wait_s if gate_live else min(wait_s, NO_GATE_WAIT_S)
    raw = _pop(ledger, ledger.keys.reply(me.user, rid), waited_s)
    if raw is None:
        raise GateSilent(rid, waited_s)
    try:
        reply = wire.Reply.model_validate_json(raw)
    except ValidationError:
        raise ColabqError(f"The gate's answer to request {rid} could not be read.") from None
    result = reply.result
    if isinstance(result, wire.Refused):
        wire.raise_refused(result)
    if reply.rid != rid or not isinstance(result, expect):
        raise ColabqError(f"The gate answered request {rid} with something else.")
    return result


def wait_for_gate(ledger: Ledger, timeout_s: float) -> bool:
    """Wait until a gate holds its lease (a worker just started: its duty takes it at once)."""
    deadline = time.monotonic() + timeout_s
    while not ledger.r.exists(ledger.keys.gate_lease()):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _pop(ledger: Ledger, key: str, wait_s: float) -> bytes | None:
    deadline = time.monotonic() + wait_s
    while (left := deadline - time.monotonic()) > 0:
        got = ledger.r.blpop([key], timeout=max(min(left, _POP_S), 0.01))
        if got is not None:
            return bytes(got[1])
    return None


def _label(text: str, most: int) -> str:
    """This machine's name or user name as a request's label (`wire.Request`'s grammars)."""
    safe = "".join(c if (c.isascii() and c.isalnum()) or c in "._-" else "_" for c in text)
    return (safe if safe[:1].isalnum() else f"0{safe}")[:most]


@dataclass(frozen=True)
class Requests:
    """The changes this process's Redis user asks the gate for, one request each."""

    ledger: Ledger
    wait_s: float

    @classmethod
    def of(cls, ledger: Ledger, settings: Settings) -> Requests:
        return cls(ledger, settings.gate_wait_s)

    def submit(self, body: wire.Submit) -> wire.Submitted:
        return ask(self.ledger, body, wire.Submitted, wait_s=self.wait_s)

    def cancel(self, job_ids: Sequence[str], reason: str) -> tuple[wire.CancelOutcome, ...]:
        if not job_ids:
            return ()
        body = _body(wire.Cancel, jobs=tuple(job_ids), reason=reason)
        return ask(self.ledger, body, wire.Cancelled, wait_s=self.wait_s).jobs

    def cancel_sweep(self, sweep_id: str, reason: str) -> tuple[wire.CancelOutcome, ...]:
        if not re.fullmatch(wire.SWEEP_ID, sweep_id):
            from worker.flow.sweeps import no_sweep

            raise UserInputError(no_sweep(sweep_id))
        body = _body(wire.CancelSweep, sweep=sweep_id, reason=reason)
        return ask(self.ledger, body, wire.Cancelled, wait_s=self.wait_s).jobs

    def retry(self, job_id: str) -> wire.Retried:
        return ask(self.ledger, wire.Retry(job=job_id), wire.Retried, wait_s=self.wait_s)

    def note(self, job_ids: Sequence[str], kind: Literal["clean"], reason: str) -> int:
        body = _body(wire.Note, jobs=tuple(job_ids), kind=kind, reason=reason[: wire.MAX_REASON])
        return ask(self.ledger, body, wire.Noted, wait_s=self.wait_s).count


B = TypeVar("B", bound=wire.Wire)


def _body(cls: type[B], **fields: object) -> B:
    """A request body from what was typed; a value its grammar refuses is one line."""
    try:
        return cls.model_validate(fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = str(err["loc"][0]) if err["loc"] else "request"
        if where == "reason":
            raise UserInputError(
                f"--reason: one line of at most {wire.MAX_REASON} characters, without control "
                "characters."
            ) from None
        raise UserInputError(f"{where} {err.get('input')!r}: {err['msg']}.") from None
