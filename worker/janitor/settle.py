"""Settling a job whose owner died and whose session its watchdog already verified gone, or
(`settle_from_store`) whose VM is on another account, from what the store proves.

`settle_outcome` decides from what the dead owner's attach client and watchdog recorded and what
the store holds (verified with this host's Hub token and endpoint: a private repo checked
without them looks empty); a cancel flag makes it CANCELLED. `settle_job` records it, with the
exit code and a report, under an adopter's token.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from worker import exitwhy, gpuidle, timelimit
from worker.colab import rates, versions
from worker.errors import ColabqError
from worker.progress import record, words
from worker.records.ledger import Ledger
from worker.records.record import JobRecord
from worker.session.codereport import not_ready
from worker.spec import JobSpec
from worker.states import HOLDS_SESSION, JobState
from worker.store.artifacts import Verification

Verifier = Callable[[JobSpec], Verification]


@dataclass(frozen=True)
class Settlement:
    state: JobState
    reason: str
    exit_code: int | None = None


def _int(v: str | None) -> int | None:
    return int(v) if v is not None and v.lstrip("-").isdigit() else None


def settle_outcome(
    rec: JobRecord, watch: Mapping[str, str], verify: Verifier, cancel: str | None = None
) -> Settlement | None:
    """The terminal state of a job whose owner died, or None if it must be left alone."""
    endpoint = rec.get("endpoint") or watch.get("endpoint")
    if not endpoint:
        if cancel is not None:
            return Settlement(JobState.CANCELLED, f"cancelled: {cancel} (owner died first)")
        return Settlement(JobState.FAILED_LOST, "owner died before a session was assigned")
    if not watch.get("gone_verified_at"):
        return None
    code = _int(watch.get("exec_exit"))
    if cancel is not None:
        return Settlement(JobState.CANCELLED, f"cancelled: {cancel} (owner died)", code)
    if why := not_ready(watch):  # the code stage said why the job never ran
        return Settlement(JobState.FAILED, f"owner died; {why}", code)
    if watch.get("results_local"):
        return Settlement(
            JobState.TIMED_OUT if timelimit.hit_time_limit(watch) else JobState.FAILED,
            f"owner died; job exited {code}; the final upload failed and the watchdog recovered "
            f"the results to {watch['results_local']}",
            code,
        )
    try:
        v = verify(rec.spec)
    except ColabqError as exc:
        return Settlement(
            JobState.FAILED, f"owner died; job exited {code}; artifacts unverifiable: {exc}", code
        )
    code = code if code is not None else v.exit_code  # the store keeps the VM's exit_code
    if code is None:
        return Settlement(
            JobState.FAILED_LOST, "owner died; the watchdog released the session; outcome unknown"
        )
    if idle := gpuidle.idle_reason(watch):
        tail = "" if v.ok else f"; {v.summary()}"
        return Settlement(JobState.FAILED, f"owner died; {idle}{tail}", code)
    if timelimit.hit_time_limit(watch):
        why = timelimit.timed_out_reason(rec.spec, code)
        tail = "" if v.ok else f"; {v.summary()}"
        return Settlement(JobState.TIMED_OUT, f"owner died; {why}{tail}", code)
    if not v.ok:
        return Settlement(JobState.FAILED, f"owner died; job exited {code}; {v.summary()}", code)
    if code != 0:
        return Settlement(JobState.FAILED, f"owner died; {exitwhy.exit_reason(code, watch)}", code)
    return Settlement(
        JobState.SUCCEEDED,
        "owner died; exit 0, artifacts verified, session released (watchdog)",
        code,
    )


def settle_from_store(
    rec: JobRecord, verify: Verifier, cancel: str | None = None
) -> Settlement | None:
    """A dead owner's job whose VM is on an account this host does not hold: its outcome only
    when the store proves the job ended (the exit code its wrapper uploads with the final sync,
    and the artifacts verified); None otherwise: the VM may still run it, and only a host of its
    account may look (it is left for that account's janitor). Its VM, if still assigned, is that
    account's janitor's orphan (or releases itself after the final upload)."""
    try:
        v = verify(rec.spec)
    except ColabqError:
        return None
    code = v.exit_code
    if code is None:
        return None
    how = f"the store holds its exit code (its VM on {rec.get('account')} was not looked at)"
    if cancel is not None:
        return Settlement(JobState.CANCELLED, f"cancelled: {cancel} (owner died; {how})", code)
    if not v.ok:
        return Settlement(JobState.FAILED, f"owner died; job exited {code}; {v.summary()}", code)
    if code != 0:
        return Settlement(JobState.FAILED, f"owner died; job exited {code}; {how}", code)
    return Settlement(JobState.SUCCEEDED, f"owner died; exit 0, artifacts verified; {how}", code)


def settle_job(
    ledger: Ledger, job_id: str, s: Settlement, location: str, *, vm_seen: bool = True
) -> bool:
    """Record `s` for a job nobody owns any more; False if someone holds its lock. `vm_seen`
    False: settled from the store by a host of another account, which never looked at the VM."""
    adopter = secrets.token_hex(16)
    if not ledger.adopt(job_id, adopter, ttl_s=60.0):
        return False
    try:
        rec = ledger.get(job_id)
        if rec.state in HOLDS_SESSION and rec.state is not JobState.RELEASING:
            ledger.transition(
                job_id, JobState.RELEASING, owner=adopter, reason="janitor: owner died"
            )
        runtime = "released (verified gone by its watchdog)"
        if not vm_seen:
            runtime = f"not looked at: left to the janitor of {rec.get('account')}"
        cli = versions.recorded_version(rec.get("colab_cli"))
        report = {
            "job_id": job_id,
            "run_name": rec.spec.run_name,
            "commit": rec.spec.commit,
            "colab_cli": cli,
            "outcome": s.state.value,
            "reason": s.reason,
            "exit_code": s.exit_code,
            "artifacts": location,
            "endpoint": rec.get("endpoint"),
            "account": rec.get("account"),
            **timelimit.limits_json(rec.spec),
            "runtime": runtime,
            "remaining_endpoint": None if vm_seen else rec.get("endpoint"),
            **rates.costs(rec.spec.gpu.value, rec.created_at, rec.fields, ledger.clock.time()),
            "next_action": "none" if s.state is JobState.SUCCEEDED else "read the log; resubmit",
            "notes": versions.report_notes(cli),
            "progress": words.report(
                record.from_watch(ledger.read_watch(job_id))[0], rec.spec.epochs
            ),
        }
        fields = {"outcome": s.state.value, "report": json.dumps(report)}
        if s.exit_code is not None:
            fields["exit_code"] = str(s.exit_code)
        ledger.transition(job_id, s.state, owner=adopter, reason=s.reason, fields=fields)
    finally:
        ledger.release_lock(job_id, adopter)
    return True
