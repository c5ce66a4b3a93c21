"""`colabq events [JOB]`: the event log (`worker.records.events`): every state change and every
action (submit, cancel, drain, undrain, adopt, janitor stop, retry, clean) with when, who, from
which host and why; `--follow` waits for new ones (XREAD BLOCK) until interrupted.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer

from producer.clictx import JsonOpt, _connect, load_settings, out

if TYPE_CHECKING:
    from worker.records.events import Event


def events(
    job: Annotated[
        str | None,
        typer.Argument(help="A job id (a unique prefix is enough) or a worker's name."),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(help="Only events of the last 2h, 3d... or since a date (2026-05-01)."),
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new events until Ctrl-C.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Print the event log (a job's, or the deployment's): when, what, who, from where, why."""
    from producer.joblist import parse_since
    from worker.errors import JobNotFound
    from worker.records import events as ev

    start = parse_since(since, time.time()) if since else 0.0
    ledger = _connect(load_settings())
    job_id = None
    if job:
        try:
            job_id = ledger.find_by_prefix(job)
        except JobNotFound:
            job_id = job  # a worker's name (drain), or a job whose record expired
    # A follower waits after the newest entry seen before the read: an event appended during
    # the read is printed by the read or by the wait, once.
    after = ev.last_id(ledger.r, ledger.keys) if follow else ""
    rows = ev.read(ledger.r, ledger.keys, since=start, job=job_id)
    printed = max((_order(e.id) for e in rows), default=(0, 0))
    for e in rows:
        _emit(e, as_json)
    if not as_json and not rows and not follow:
        out.print("No events.")
    while follow:
        got, after, _ = ev.wait(ledger.r, ledger.keys, after, block_ms=5000)
        for e in got:
            if (job_id is None or e.job == job_id) and _order(e.id) > printed:
                _emit(e, as_json)


def _order(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    try:
        return int(ms), int(seq or 0)
    except ValueError:
        return 0, 0


def _emit(e: Event, as_json: bool) -> None:
    if as_json:
        print(json.dumps(e.to_json()), flush=True)
        return
    try:
        when = datetime.fromtimestamp(e.at).strftime("%Y-%m-%d %H:%M:%S")
    except (ValueError, OverflowError, OSError):  # a time no clock shows (year 10000...)
        when = f"{e.at:.0f}"
    what = f"{e.src or '-'} -> {e.dst}" if e.kind == "state" else e.kind
    who = f"{e.actor}@{e.host}" if e.host else e.actor
    print(f"{when}  {e.job:<24}  {what:<24}  {who:<28}  {e.reason}", flush=True)
