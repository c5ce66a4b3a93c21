"""`colabq retry JOB`: a finished job's exact spec submitted again, in one step, as a new job.

Owns the command: which jobs can be retried (those that ended without succeeding: FAILED,
TIMED_OUT, CANCELLED, lost, no GPU or no budget; `worker.records.create.RESUBMITTABLE`), the new
spec (the old one with a new id and this submission's time, host and user; same script, inputs,
limits, destination, idempotency key and pre-flight digest), and what is printed. The record and
the link between the two jobs (`retry_of` on the new one, `retried_as` on the old) are the
ledger's creation script's; the message is `producer.submit.enqueue`'s.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from producer.clictx import JsonOpt, _connect, build_app, load_settings, out, queue_for

JobArg = Annotated[str, typer.Argument(help="The finished job's id (a unique prefix is enough).")]


def retry(job: JobArg, as_json: JsonOpt = False) -> None:
    """Submit a job that failed, timed out, was cancelled or lost again, as a new job linked to
    it (its exact spec: no pre-flight is run again)."""
    import secrets
    import socket
    from datetime import UTC, datetime

    from producer.joblist import whoami
    from producer.submit import enqueue
    from worker.errors import UserInputError
    from worker.people.guard import check_may_change
    from worker.records.create import RESUBMITTABLE
    from worker.states import JobState

    settings = load_settings()
    ledger = _connect(settings)
    old_id = ledger.find_by_prefix(job)
    # The new job links back to the old one (`retried_as` on its record): its owner's key.
    check_may_change(ledger, [old_id], "retry")
    old = ledger.get(old_id)
    if old.state is JobState.SUCCEEDED:
        raise UserInputError(
            f"Job {old_id} SUCCEEDED: nothing to retry. To run it again, submit it with a new "
            "--idempotency-key."
        )
    if old.state not in RESUBMITTABLE:
        raise UserInputError(
            f"Job {old_id} is {old.state.name}, not over: follow it (`colabq logs -f {old_id}`), "
            f"or cancel it first (`colabq cancel {old_id}`)."
        )
    spec = old.spec.model_copy(
        update={
            "job_id": secrets.token_hex(8),
            "submitted_at": datetime.now(UTC),
            "submitted_from": socket.gethostname(),
            "submitted_by": whoami(),
        }
    )
    res = enqueue(spec, ledger, build_app(settings), settings.queue_prefix)
    if res.created:
        from worker.records.events import note_action

        note_action(ledger, old_id, "retry", f"submitted again as job {res.job_id}")
    queue = queue_for(spec.gpu, settings.queue_prefix)
    if as_json:
        print(
            json.dumps(
                {
                    "job_id": res.job_id,
                    "retry_of": old_id,
                    "created": res.created,
                    "state": res.state.value,
                    "queue": queue,
                }
            )
        )
        return
    if res.created:
        out.print(
            f"Job {old_id} ({old.state.name}) submitted again as job {res.job_id} on {queue} "
            f"({spec.run_name}). Follow it with: colabq logs -f {res.job_id}",
            markup=False,
        )
    else:
        out.print(
            f"Job {old_id} was already submitted again: job {res.job_id} ({res.state.name}); "
            f"nothing enqueued. Follow it with: colabq logs -f {res.job_id}",
            markup=False,
        )
