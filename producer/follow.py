"""Following a job's log lines from the ledger, until it ends (`colabq logs -f`, the demo, the
Python API's `Client.logs`).

Reads the job's log stream in order, each line once, and returns the job's final state; what
becomes of each line (text, JSON, a progress display) is the caller's.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING

from worker.states import TERMINAL, JobState

if TYPE_CHECKING:
    from worker.records.ledger import Ledger
    from worker.records.record import LogLine


def follow_logs(
    ledger: Ledger, job_id: str, *, follow: bool, write: Callable[[str], None]
) -> JobState:
    """`follow_lines` for callers that want each line's text only."""
    return follow_lines(ledger, job_id, follow=follow, emit=lambda line: write(line.text))


def follow_lines(
    ledger: Ledger,
    job_id: str,
    *,
    follow: bool,
    emit: Callable[[LogLine], None],
    on_state: Callable[[JobState], None] | None = None,
) -> JobState:
    """Emit the job's log lines; with `follow`, until the job is over. Returns its state.
    `on_state` is told the job's state at each turn (what `logs -f` says while it waits)."""
    lines = iter_lines(ledger, job_id, follow=follow, on_state=on_state)
    while True:
        try:
            line = next(lines)
        except StopIteration as done:
            state: JobState = done.value
            return state
        emit(line)


def iter_lines(
    ledger: Ledger,
    job_id: str,
    *,
    follow: bool,
    after: str = "0-0",
    on_state: Callable[[JobState], None] | None = None,
) -> Generator[LogLine, None, JobState]:
    """The job's log lines after the stream entry `after`, in order, each once: those there now
    or, with `follow`, until the job is over (waiting up to a second at a time for the next).
    Returns the job's state."""
    if not follow:
        yield from _drain(ledger, job_id, after)
        return ledger.get(job_id).state
    while True:
        if on_state is not None:
            on_state(ledger.state_of(job_id))
        for line in ledger.read_log(job_id, after, block_ms=1000):
            after = line.id
            yield line
        state = ledger.get(job_id).state
        if state in TERMINAL:
            # What arrived between the last read and the terminal state.
            yield from _drain(ledger, job_id, after)
            return state


def _drain(ledger: Ledger, job_id: str, after: str) -> Iterator[LogLine]:
    """Every line after `after` now, a batch (`read_log`'s count) at a time."""
    while batch := ledger.read_log(job_id, after):
        yield from batch
        after = batch[-1].id
