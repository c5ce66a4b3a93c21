"""`colabq cancel`: one job, several, or every job a filter selects (`--run GLOB`, `--state`,
`--mine`, the same filters as `colabq status`). Under Redis ACLs a user who is not an operator
cancels only their own jobs (`worker.people.guard`).

Owns choosing the jobs and saying what happened to each. Cancelling them is the gate's (one
request, `worker.gate.ops.cancel`): a job no live runner holds and that holds no session ends
CANCELLED at once; otherwise a flag asks its runner (or the adopter of a dead one) to stop its
session, verified, and end it. `--json` has one
shape however many jobs: `{"jobs": [{"job_id", "state_before", "result"}], "count": N}`, where
result is cancelled, requested or already_over. `--sweep ID` names every point of a sweep that
is not over (`worker.flow.sweeps`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import typer

from producer.clictx import _connect, load_settings, out

if TYPE_CHECKING:
    from worker.gate.wire import CancelOutcome
    from worker.records.ledger import Ledger

RESULT_HELP = (
    'Print {"jobs": [{"job_id", "state_before", "result"}], "count"}; result is cancelled (no '
    "live runner held it and it held no session), requested (its runner, or the adopter of a "
    "dead one, stops it) or already_over."
)


def cancel(
    jobs: Annotated[
        list[str] | None,
        typer.Argument(
            help="Job ids (a unique prefix is enough); several may be given.", show_default=False
        ),
    ] = None,
    run: Annotated[
        str | None,
        typer.Option("--run", help="Every live job whose run name matches this glob (coco-*)."),
    ] = None,
    state: Annotated[
        list[str] | None,
        typer.Option(
            help="Only jobs in this state or group (queued, running, live, ...); default: live."
        ),
    ] = None,
    mine: Annotated[bool, typer.Option("--mine", help="Only jobs submitted by me.")] = False,
    reason: Annotated[str, typer.Option(help="Recorded on each job.")] = "cancelled by user",
    as_json: Annotated[bool, typer.Option("--json", help=RESULT_HELP)] = False,
    sweep: Annotated[
        str | None,
        typer.Option(help="Every point of this sweep not over yet (its id, from submit)."),
    ] = None,
) -> None:
    """Cancel jobs: each one's runner stops its session (verified) and ends it CANCELLED.

    Name them by id, or select them like `colabq status` does: `--run 'coco-*'`,
    `--state queued --mine` (filters combine; ids and filters add up).
    """
    from producer.ask import Requests
    from worker.errors import UserInputError
    from worker.people.guard import mine_unless_operator

    if not jobs and run is None and not state and not mine and sweep is None:
        raise UserInputError(
            "Name the jobs to cancel: job ids, or a filter (--run GLOB, --state queued, --mine, "
            "--sweep ID)."
        )
    settings = load_settings()
    ledger = _connect(settings)
    chosen = [ledger.find_by_prefix(j) for j in jobs or ()]
    if run is not None or state or mine:
        # A filter selects only one's own jobs, unless an operator; a job named by its id is
        # the gate's to refuse (one line) if it is someone else's.
        found = mine_unless_operator(ledger, select(ledger, run, state or (), mine))
        chosen += [j for j in found if j not in chosen]
    asks = Requests.of(ledger, settings)
    outcomes = list(asks.cancel(list(dict.fromkeys(chosen)), reason))
    if sweep is not None:
        done = {o.job_id for o in outcomes}
        outcomes += [o for o in asks.cancel_sweep(sweep, reason) if o.job_id not in done]
    if as_json:
        print(json.dumps({"jobs": [outcome_json(o) for o in outcomes], "count": len(outcomes)}))
        return
    if not outcomes:
        out.print("No job matches; nothing cancelled.", markup=False)
    for o in outcomes:
        out.print(outcome_text(o), markup=False)


def select(ledger: Ledger, run: str | None, states: Sequence[str], mine: bool) -> list[str]:
    """The ids of the jobs the filters select, newest first (live ones unless `states` says)."""
    from producer.joblist import GROUPS, Filters, find_matching, parse_states

    chosen_states = parse_states(states) or GROUPS["live"]
    filters = Filters(chosen_states, run, None, ledger.identity.submitter if mine else None)
    ids = [i.decode() for i in ledger.r.zrevrange(ledger.keys.jobs(), 0, -1)]
    if filters.live_only:
        live = {i.decode() for i in ledger.r.smembers(ledger.keys.active())}
        ids = [i for i in ids if i in live]
    return find_matching(ledger.r, ledger.keys, ids, filters)


def outcome_json(o: CancelOutcome) -> dict[str, str]:
    return {"job_id": o.job_id, "state_before": o.state_before.value, "result": o.result}


def outcome_text(o: CancelOutcome) -> str:
    """What happened to one job, in one line."""
    if o.result == "already_over":
        return f"Job {o.job_id} is already {o.state_before.name}; nothing to cancel."
    if o.result == "cancelled":
        return f"Job {o.job_id} cancelled: no live runner held it and it held no session."
    return (
        f"Cancel requested for job {o.job_id}; its runner (or the janitor's adopter, if its "
        "runner is gone) stops the session and ends it."
    )
