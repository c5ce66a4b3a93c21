"""Following a job's log lines from the ledger, until it ends (`colabq logs -f`, the demo).

Reads the job's log stream in order, each line once, and returns the job's final state; what
becomes of each line (text, JSON, a progress display) is the caller's.
"""

from __future__ import annotations

from collections.abc import Callable
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
    after = "0-0"
    while True:
        if on_state is not None and follow:
            on_state(ledger.state_of(job_id))
        for line in ledger.read_log(job_id, after, block_ms=1000 if follow else None):
            after = line.id
            emit(line)
        state = ledger.get(job_id).state
        if not follow:
            return state
        if state in TERMINAL:
            # Drain what arrived between the last read and the terminal state.
            for line in ledger.read_log(job_id, after):
                after = line.id
                emit(line)
            return state
