"""`colabq cancel`: one job, several, or every job a filter selects (`--run GLOB`, `--state`,
`--mine`, the same filters as `colabq status`). Under Redis ACLs a user who is not an operator
cancels only their own jobs (`worker.people.guard`).

Owns choosing the jobs and saying what happened to each. Cancelling one is the ledger's: a job
no live runner holds and that holds no session ends CANCELLED at once; otherwise a flag asks its
runner (or the adopter of a dead one) to stop its session, verified, and end it. `--json` has one
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
    from worker.errors import UserInputError
    from worker.people.guard import check_may_change, mine_unless_operator

    if not jobs and run is None and not state and not mine and sweep is None:
        raise UserInputError(
            "Name the jobs to cancel: job ids, or a filter (--run GLOB, --state queued, --mine, "
            "--sweep ID)."
        )
    ledger = _connect(load_settings())
    chosen = [ledger.find_by_prefix(j) for j in jobs or ()]
    if sweep is not None:
        chosen += _live_points(ledger, sweep)
    # Under ACLs a user cancels only their own jobs (Redis refuses the rest): a job named by
    # its id is refused in one line; a filter selects only one's own.
    check_may_change(ledger, chosen, "cancel")
    if run is not None or state or mine:
        found = mine_unless_operator(ledger, select(ledger, run, state or (), mine))
        chosen += [j for j in found if j not in chosen]
    results = [cancel_one(ledger, job_id, reason) for job_id in dict.fromkeys(chosen)]
    if as_json:
        print(json.dumps({"jobs": [r for r, _ in results], "count": len(results)}))
        return
    if not results:
        out.print("No job matches; nothing cancelled.", markup=False)
    for _, text in results:
        out.print(text, markup=False)


def _live_points(ledger: Ledger, sweep: str) -> list[str]:
    from producer.commands.sweepview import sweep_points

    ids = sweep_points(ledger, sweep)
    live = {i.decode() for i in ledger.r.smembers(ledger.keys.active())}
    return [i for i in ids if i in live]


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


def cancel_one(ledger: Ledger, job_id: str, reason: str) -> tuple[dict[str, str], str]:
    """Cancel one job: (its `--json` object, its line of text)."""
    from worker.states import TERMINAL

    before = ledger.get(job_id).state
    if before in TERMINAL:
        result = "already_over"
        text = f"Job {job_id} is already {before.name}; nothing to cancel."
    elif ledger.cancel(job_id, reason):
        result = "cancelled"
        text = f"Job {job_id} cancelled: no live runner held it and it held no session."
    else:
        result = "requested"
        text = (
            f"Cancel requested for job {job_id}; its runner (or the janitor's adopter, if its "
            "runner is gone) stops the session and ends it."
        )
    return {"job_id": job_id, "state_before": before.value, "result": result}, text
