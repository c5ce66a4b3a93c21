"""`colabq retry JOB`: a finished job's exact spec submitted again, in one step, as a new job.

Owns the command and what it prints. The retry itself is the gate's (`worker.gate.ops.retry`):
which jobs can be retried (those that ended without succeeding: FAILED, TIMED_OUT, CANCELLED,
lost, no GPU or no budget; `worker.records.create.RESUBMITTABLE`), the new spec (the old one with
a new id, of the old job's owner, and this submission's time and host; same script, inputs,
limits, destination, idempotency key and pre-flight digest), the record and the link between
the two jobs (`retry_of` on the new one, `retried_as` on the old), and the message.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from producer.clictx import JsonOpt, _connect, load_settings, out, queue_for

JobArg = Annotated[str, typer.Argument(help="The finished job's id (a unique prefix is enough).")]


def retry(job: JobArg, as_json: JsonOpt = False) -> None:
    """Submit a job that failed, timed out, was cancelled or lost again, as a new job linked to
    it (its exact spec: no pre-flight is run again)."""
    from producer.ask import Requests

    settings = load_settings()
    ledger = _connect(settings)
    old_id = ledger.find_by_prefix(job)
    spec = ledger.get(old_id).spec
    done = Requests.of(ledger, settings).retry(old_id)
    res, old_state = done.job, done.old_state
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
            f"Job {old_id} ({old_state.name}) submitted again as job {res.job_id} on {queue} "
            f"({spec.run_name}). Follow it with: colabq logs -f {res.job_id}",
            markup=False,
        )
    else:
        out.print(
            f"Job {old_id} was already submitted again: job {res.job_id} ({res.state.name}); "
            f"nothing enqueued. Follow it with: colabq logs -f {res.job_id}",
            markup=False,
        )
