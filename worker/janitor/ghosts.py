"""Ghost tracker runs: runs colabq opened for a job that is over, still "running" in the tracker.

A job that dies (a killed VM, a wall cap, a cancel, a lost host) never closes its run, and the
tracker shows it running forever. For each ended job the ledger queued (`Keys.tracker_check`),
a pass asks the tracker once; a run still running is closed as its job ended (MLflow: FAILED,
KILLED, or FINISHED for a succeeded job whose script did not close it, with the reason as a tag;
W&B: marked), or deleted where the user configured it. Closed and absent runs leave the queue;
a tracker that cannot be reached leaves them for the next pass. A dry run asks nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from worker.errors import TrackerError
from worker.janitor.snapshot import TrackedRun
from worker.states import TERMINAL
from worker.tracker.runs import MLFLOW, TrackerRef, TrackerRuns, ending_for

log = logging.getLogger(__name__)
_SETTINGS = {MLFLOW: "COLABQ_MLFLOW_TRACKING_URI", "wandb": "COLABQ_WANDB_API_KEY_FILE"}


@dataclass(frozen=True)
class GhostRow:
    subject: str  # the run, as recorded on its job
    seen: str
    did: str
    why: str


def check_runs(
    tracked: Sequence[TrackedRun],
    trackers: Mapping[str, TrackerRuns],
    *,
    dry_run: bool,
    delete: bool,
) -> tuple[list[GhostRow], list[str]]:
    """(rows, job ids whose run needs no more checking)."""
    rows: list[GhostRow] = []
    done: list[str] = []
    for t in {t.job_id: t for t in tracked}.values():
        if t.ref is None or t.state is None or t.state not in TERMINAL:
            done.append(t.job_id)  # the record expired (or never ended): nothing to check
            continue
        ref = TrackerRef.parse(t.ref)
        job = f"job {t.job_id} {t.state.name}"
        if ref is None:
            done.append(t.job_id)
            rows.append(GhostRow(t.ref, job, "left alone", "not a tracker run colabq knows"))
            continue
        client = trackers.get(ref.kind)
        if client is None:
            why = f"no {ref.kind} settings on this host ({_SETTINGS[ref.kind]}): not checked"
            rows.append(GhostRow(t.ref, job, "left alone", why))
            continue
        ending = ending_for(t.state)
        if dry_run:
            did = f"would: finish {ending.value} if still running" + (
                " (and delete)" if delete else ""
            )
            rows.append(GhostRow(t.ref, job, did, "not asked: a dry run makes no remote call"))
            continue
        try:
            status = client.status(ref)
            if status is None:
                done.append(t.job_id)
                rows.append(GhostRow(t.ref, job, "left alone", "not in the tracker (deleted)"))
                continue
            if not client.is_running(status):
                done.append(t.job_id)
                rows.append(GhostRow(t.ref, f"{job}; run {status}", "left alone", "closed"))
                continue
            did = client.finish(ref, ending, job_id=t.job_id, state=t.state.name, reason=t.reason)
            if delete:
                did += f"; {client.delete(ref)}"
        except TrackerError as exc:
            rows.append(GhostRow(t.ref, job, "failed: check", exc.advice()))
            continue
        except Exception as exc:  # this run alone fails; the others are still checked
            log.error("janitor: tracker run %s of job %s failed: %s", t.ref, t.job_id, exc,
                      exc_info=True)  # fmt: skip
            rows.append(GhostRow(t.ref, job, "failed: check", f"{type(exc).__name__}: {exc}"))
            continue
        done.append(t.job_id)
        why = f"still {status} while its job is over: {t.reason}"
        rows.append(GhostRow(t.ref, f"{job}; run {status}", f"did: {did}", why))
    return rows, done
