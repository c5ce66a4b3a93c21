"""The assignment request of `colab new`: the real `Client.assign`, as 0.7.4 and 0.7.5 send it.

A GET of `/tun/m/assign?nbh=<notebook hash>` first (a notebook that is assigned already is
returned as it is), then the POST that assigns. The fault `assign` applies once per POST:
- `http`: the POST fails with that status; `"network"` is a connection error; `"timeout"` is no
  answer within the request timeout (the POST waits that long, then raises ReadTimeout);
- `assigned: true`: the server made the assignment although the POST failed (a gateway's 502 or
  504 after the backend did the work, an answer that came after the client gave up);
- `delay_s` (a slow answer; at or past the request timeout it is a read timeout), `hang`,
  `times` (counted in POSTs), `match_session`, `match_home`, as for every fault.

0.7.4 fails at the first failed POST. 0.7.5 retries on 502/503/504 and on a read timeout,
`COLAB_CLI_ASSIGN_RETRIES` times: it logs `Assignment request failed; retrying in %.0fs` (logger
`colab_cli.client`, WARNING: in colab.log, and on stderr only under `--logtostderr`), sleeps the
backoff (`COLAB_CLI_RETRY_BACKOFF`, doubled each time), then asks the GET again: an assignment the
failed POST made after all is returned, never made twice. Either release gives up after its last
POST without asking the GET again. 412 and 400 are never retried (`cmd_new` prints them).
"""

from __future__ import annotations

import time
from typing import Any

from .context import EmuContext
from .errors import COLAB_BASE, http_error, read_timeout
from .faults import apply_delay, take_fault
from .ids import random_uuid
from .release import release_from
from .session_ops import backend_for
from .store import log_debug, log_record

RETRYABLE = (502, 503, 504, "timeout")


class PostFailed(Exception):
    """One POST failed: `status` (an HTTP status, "network" or "timeout") and what it raised."""

    def __init__(self, status: int | str, raised: Exception) -> None:
        super().__init__(str(raised))
        self.status = status
        self.raised = raised


class Refused(Exception):
    """The POST was answered 412 (TooManyAssignmentsError) or 400: `cmd_new` prints it."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def request_assignment(
    ctx: EmuContext, name: str, query: str, hardware: tuple[str, str, str], served: str | None
) -> dict[str, Any]:
    """The assignment `new` gets for `hardware` (variant, accelerator, shape), or raises what
    the real client raises (`Refused` for 412/400, else the failed request's exception)."""
    release = release_from(ctx.environ)
    nbh = random_uuid()
    url = f"{COLAB_BASE}/tun/m/assign?nbh={nbh}&{query}&authuser=0"
    log_debug(ctx, f"GET {url} -> 200")
    retries = release.assign_retries(ctx.environ)
    for attempt in range(retries + 1):
        try:
            return _post(ctx, name, url, nbh, hardware, served)
        except PostFailed as failure:
            if failure.status in (412, 400):
                raise Refused(int(failure.status)) from None
            if failure.status not in RETRYABLE or attempt >= retries:
                raise failure.raised from None
            delay_s = release.retry_backoff_s(ctx.environ) * 2**attempt
            log_record(
                ctx, "colab_cli.client", "WARNING",
                f"Assignment request failed; retrying in {delay_s:.0f}s",
            )  # fmt: skip
            time.sleep(delay_s)
            log_debug(ctx, f"GET {url} -> 200")
            found = backend_for(ctx).by_notebook(nbh)
            if found is not None:
                return found
    raise AssertionError("unreachable: the last attempt returns or raises")


def _post(
    ctx: EmuContext,
    name: str,
    url: str,
    nbh: str,
    hardware: tuple[str, str, str],
    served: str | None,
) -> dict[str, Any]:
    variant, accelerator, shape = hardware
    fault = take_fault(ctx.emu_home, "assign", name)
    timeout_s = release_from(ctx.environ).request_timeout_s(ctx.environ)
    status = fault.get("http")
    slow_s = float(fault.get("delay_s") or 0)
    if slow_s >= timeout_s or status == "timeout":
        time.sleep(timeout_s)  # the client gives up; the server may still have done the work
        status = "timeout"
    else:
        apply_delay(fault)

    def assign() -> dict[str, Any]:
        return backend_for(ctx).assign(
            variant, served or accelerator, shape, ctx.environ, requested=accelerator, nbh=nbh
        )

    if status is None:
        assignment = assign()
        log_debug(ctx, f"POST {url} -> 200 {assignment}")
        return assignment
    if fault.get("assigned"):
        assign()
    if status == "timeout":
        log_debug(ctx, f"POST {url} -> no answer in {timeout_s} s")
        raise PostFailed(status, read_timeout(timeout_s))
    log_debug(ctx, f"POST {url} -> {status}")
    raise PostFailed(status, http_error("POST", url, status))
