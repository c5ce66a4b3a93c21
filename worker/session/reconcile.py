"""After a `colab new` that failed, or that colabq killed: did it assign a VM to the session's name?

The CLI writes its record (name -> endpoint) once the server has assigned. colabq's timeout on
`new` outlasts the CLI's own worst case (`worker.colab.versions`), so it kills a `new` only when
the CLI hangs; and a `new` that failed by itself (0.7.5 gave up retrying, a network error) may
still have assigned. Either way the answer is found by name, never by guess:

- the CLI's record of the name (or the endpoint the watchdog handed over from it) is live in
  `colab status -s NAME` at the handed-over endpoint: ADOPTED, the job goes on with that VM and
  no second `new` is made for it;
- no record, or one whose VM the account no longer holds (status prunes it): NOTHING was
  assigned under the name. `colab sessions` then shows any assignment no record names (`[?]`):
  they are reported, never stopped: an unnamed assignment may be anyone's (invariant 3), and
  the janitor reports it too;
- status fails, or shows the name at another endpoint than the one handed over: UNKNOWN, with the
  endpoint if one is known, which the caller releases (a verified stop) before the job goes back.

Only finds; the runner decides (`worker.session.start`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from worker.colab.driver import ColabDriver
from worker.errors import ColabError


class Found(StrEnum):
    ADOPTED = "adopted"  # the name's VM is live: go on with it
    NOTHING = "nothing"  # nothing assigned under the name
    UNKNOWN = "unknown"  # cannot tell: release `endpoint` if there is one


@dataclass(frozen=True)
class Reconciled:
    found: Found
    endpoint: str | None = None
    # `[?]` assignments seen (endpoint and hardware), reported and never touched.
    unnamed: tuple[str, ...] = ()


def reconcile_new(
    driver: ColabDriver, name: str, handed_over: str | None, log: Callable[[str], None]
) -> Reconciled:
    """What the failed `colab new` of NAME left: `handed_over` is the endpoint the watchdog
    recorded from the CLI's state while `new` ran (None if it saw none)."""
    try:
        status = driver.status(name)
    except ColabError as exc:
        log(f"`colab status -s {name}` failed ({exc.advice()}): cannot tell what `new` left")
        return Reconciled(Found.UNKNOWN, handed_over or _recorded(driver, name))
    if status is not None:
        if handed_over is not None and status.endpoint != handed_over:
            log(f"{name} is at {status.endpoint}, not at the handed-over {handed_over}")
            return Reconciled(Found.UNKNOWN, handed_over)
        return Reconciled(Found.ADOPTED, status.endpoint)
    try:
        listed = driver.sessions()
    except ColabError as exc:
        log(f"`colab sessions` failed ({exc.advice()}); unnamed assignments not looked for")
        return Reconciled(Found.NOTHING)
    unnamed = tuple(f"{s.endpoint} ({s.hardware})" for s in listed if s.name is None)
    return Reconciled(Found.NOTHING, None, unnamed)


def _recorded(driver: ColabDriver, name: str) -> str | None:
    try:
        record = driver.local_record(name)
    except ColabError:
        return None
    return record.endpoint if record is not None and record.endpoint else None
