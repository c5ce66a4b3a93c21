"""`colabq logs JOB`: a job's output, from any machine; `-f` follows it until the job ends and
exits with its outcome, saying on stderr, while it waits in its queue, which workers it waits
for (`producer/waiting.py`). Reading the log stream in order is `producer/follow.py`'s.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from producer import exitcodes
from producer.clictx import JobArg, _connect, err, load_settings, queue_for

if TYPE_CHECKING:
    from worker.records.record import LogLine


def logs(
    job: JobArg,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow", "-f", help="Keep printing until the job ends; exit with its outcome."
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help='One JSON object a line: {"id", "line", "stream"}.')
    ] = False,
) -> None:
    """Print a job's output (from any machine); -f follows it live and exits with its outcome
    (while it waits in its queue, stderr says for which workers)."""
    settings = load_settings()
    ledger = _connect(settings)
    job_id = ledger.find_by_prefix(job)

    def emit(line: LogLine) -> None:
        if as_json:
            row = {"id": line.id, "line": line.text, "stream": line.stream}
            print(json.dumps(row), flush=True)
        else:
            print(line.text, flush=True)

    notice = None
    if follow:
        from producer.waiting import WaitNotices

        def say(text: str) -> None:
            err.print(text, markup=False, highlight=False, soft_wrap=True)

        notice = WaitNotices(ledger, job_id, lambda g: queue_for(g, settings.queue_prefix), say)
    from producer.follow import follow_lines

    state = follow_lines(ledger, job_id, follow=follow, emit=emit, on_state=notice)
    if follow:
        raise typer.Exit(exitcodes.for_state(state))
