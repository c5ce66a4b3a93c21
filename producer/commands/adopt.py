"""`colabq adopt JOB`: take over a job whose worker host is gone and finish it from this machine
(`worker.session.owner.adopt_job`); exits with the job's outcome.
"""

from __future__ import annotations

import json

import typer

from producer import exitcodes
from producer.clictx import JobArg, JsonOpt, _connect, load_settings, out
from worker.states import TERMINAL, JobState


def adopt(job: JobArg, as_json: JsonOpt = False) -> None:
    """Take over a job whose worker host is gone, and finish it from this machine.

    Needs the account's Colab credentials and the worker settings (Redis, state dir, Hub token
    file). Waits until the job's lease expired; runs until the job ends, then prints its state
    and exits with the job's outcome (as `logs -f`).
    """
    import socket

    from worker.people.guard import check_operator
    from worker.session.owner import adopt_job

    settings = load_settings()
    settings.ensure_state_dir()
    ledger = _connect(settings)
    job_id = ledger.find_by_prefix(job)
    # Adopting writes the job's lock, lease and session: a service's or operator's rights.
    check_operator(ledger, f"Adopting job {job_id}")
    from worker.records.events import note_action

    note_action(ledger, job_id, "adopt", "colabq adopt: finishing it from this host")
    outcome = adopt_job(job_id, settings, ledger, worker_name=f"adopter@{socket.gethostname()}")
    if outcome is None:
        rec = ledger.get(job_id)
        over = rec.state in TERMINAL
        why = "it has a live owner"
        if over or rec.state is JobState.QUEUED:
            why = "it is over" if over else "it is queued: a worker takes it"
        if as_json:
            row = {"job_id": job_id, "adopted": False, "state": rec.state.value, "reason": why}
            print(json.dumps(row))
        else:
            out.print(f"Job {job_id} is {rec.state.name}: {why}; nothing done.")
        raise typer.Exit(exitcodes.OK if over else exitcodes.FAILED)
    if as_json:
        state, reason = outcome.state.value, outcome.reason
        print(json.dumps({"job_id": job_id, "adopted": True, "state": state, "reason": reason}))
    else:
        out.print(f"Job {job_id} {outcome.state.name}: {outcome.reason}", markup=False)
    raise typer.Exit(exitcodes.for_state(outcome.state))
