"""The verified stop: the only way colabq ends a session (invariants 2 and 3).

A session is stopped only when `colab status` shows exactly the owned name at the recorded
endpoint; after the stop, a status that says "not found" proves it is gone. A mismatch is
reported, never acted on. A "not found" before the stop is asked again of the account's
assignments (`witness.confirm_gone`): the CLI prunes the record of a live VM after a 401.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from worker.clock import Clock
from worker.colab.driver import ColabDriver
from worker.colab.witness import Witness, confirm_gone
from worker.errors import ColabError, ColabqError, refuse
from worker.records import ids


class ReleaseOutcome(StrEnum):
    ALREADY_GONE = "released (self-released or already gone, verified)"
    STOPPED = "released (stopped by colabq, verified)"


class EndpointMismatch(ColabqError):
    def __init__(self, name: str, recorded: str, seen: str) -> None:
        super().__init__(
            f"Session {name} shows endpoint {seen}, but colabq recorded {recorded}: "
            "not stopping it."
        )
        self.name, self.recorded, self.seen = name, recorded, seen

    hint = "Check the account's sessions (`colab sessions`) and stop it by hand if it is yours."


class ReleaseNotVerified(ColabqError):
    hint = "Run `colab sessions` on the worker host and stop the session if it is still listed."


def release_session(
    driver: ColabDriver,
    name: str,
    endpoint: str,
    *,
    clock: Clock,
    log: Callable[[str], None],
    attempts: int = 5,
    backoff_s: float = 2.0,
) -> ReleaseOutcome:
    """Stop `name` if it is still ours at `endpoint`, retrying failed stops; verify it is gone.

    The first attempt checks ownership against the CLI's own record (the endpoint `colab stop`
    would unassign) and stops at once: billing ends a status call sooner. Later attempts ask
    `colab status` first, which also prunes a record whose VM is already gone."""
    # Only a name and an endpoint in their grammars ever reach the CLI (invariant 3).
    ids.session(name) or refuse("session", "the session to release", name)
    ids.endpoint(endpoint) or refuse("endpoint", f"the endpoint of {name}", endpoint)
    last: Exception | None = None
    stopped = False
    for attempt in range(attempts):
        try:
            if attempt == 0 and not stopped:
                rec = driver.local_record(name)
                seen_endpoint = rec.endpoint if rec is not None else None
            else:
                st = driver.status(name)
                seen_endpoint = st.endpoint if st is not None else None
            if seen_endpoint is None and not stopped:
                # No record: pruned by a sync that saw the VM gone, never written, or pruned
                # after a 401 while the VM lives (the witness writes it again: stop it then).
                seen = confirm_gone(driver, name, endpoint, log)
                if seen is Witness.RESTORED:
                    continue
                if seen is Witness.UNKNOWN:
                    raise ColabError(f"{name} not found and the account's sessions unreadable")
            if seen_endpoint is None:
                return ReleaseOutcome.STOPPED if stopped else ReleaseOutcome.ALREADY_GONE
            if seen_endpoint != endpoint:
                raise EndpointMismatch(name, endpoint, seen_endpoint)
            log(f"stopping {name} at {endpoint}")
            driver.stop(name)
            stopped = True
            if driver.status(name) is None:
                return ReleaseOutcome.STOPPED
        except ColabError as exc:
            last = exc
            log(f"stop attempt {attempt + 1} failed: {exc}")
            clock.sleep(backoff_s * 2**attempt)
    raise ReleaseNotVerified(f"Session {name} at {endpoint} was not verified gone: {last}")
