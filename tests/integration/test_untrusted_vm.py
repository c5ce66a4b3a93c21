"""A record that names another job's VM, on a real worker, the emulated account and the real
Redis: a user's own record (written here with an unrestricted connection, as on a deployment
without ACLs, or by a rule misapplied) carrying another job's session and endpoint and an empty
owner is neither adopted by the janitor nor by an operator's `colabq adopt`, and nothing stops
the VM; the real job goes on, SUCCEEDS, and its own runner releases its VM."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys

import pytest

from tests.integration.conftest import Fleet
from tests.integration.test_janitor_fleet import beat_host, janitor, rows
from tests.integration.test_run_on_vm import assert_clean, endpoint_of, submit, wait_for
from worker.records import events
from worker.states import JobState

pytestmark = pytest.mark.integration


def forge(fleet: Fleet, victim: str, *, endpoint: str) -> str:
    """A job record of the forger's own: the victim's record with its own id, no owner, and
    `endpoint` with the victim's session name; listed as live."""
    r, k = fleet.ledger.r, fleet.ledger.keys
    raw = {f.decode(): v.decode() for f, v in r.hgetall(k.job(victim)).items()}
    forged = secrets.token_hex(8)
    spec = json.loads(raw["spec"])
    spec.update(job_id=forged, idempotency_key=secrets.token_hex(8))
    raw.update(spec=json.dumps(spec), owner="", state="running", endpoint=endpoint, account="")
    r.hset(k.job(forged), mapping=raw)
    r.sadd(k.active(), forged)
    r.zadd(k.jobs(), {forged: float(raw["created_at"])})
    return forged


def test_a_record_naming_another_jobs_vm_is_neither_adopted_nor_released(fleet: Fleet) -> None:
    go = fleet.share() / "go"
    job_id = submit(fleet, f"echo started\nwhile [ ! -e {go} ]; do sleep 0.2; done\necho done\n")
    endpoint = endpoint_of(fleet, job_id)
    wait_for(lambda: "started" in fleet.output(job_id), "the job started")
    same_vm = forge(fleet, job_id, endpoint=endpoint)
    same_name = forge(fleet, job_id, endpoint="gpu-0000000000")  # an endpoint of no job
    before = {j: fleet.ledger.r.hgetall(fleet.ledger.keys.job(j)) for j in (same_vm, same_name)}

    report = janitor(beat_host(fleet))
    [vm_row] = rows(report, same_vm)
    assert vm_row["did"] == "left alone", vm_row
    assert f"maps {endpoint} to job {job_id!r}" in vm_row["why"], vm_row
    [name_row] = rows(report, same_name)
    assert name_row["did"] == "left alone" and "maps gpu-0000000000 to no job" in name_row["why"]
    [live] = rows(report, endpoint)
    assert live["did"] == "left alone" and live["why"].startswith("live"), live

    # An operator (or the janitor's adopter) asked to adopt it directly: one line, nothing done.
    adopt = subprocess.run(
        [sys.executable, "-m", "producer.cli", "adopt", same_vm],
        env=fleet.other_host("operator"), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    said = adopt.stdout + adopt.stderr
    assert adopt.returncode != 0 and "names a VM not its own" in said, said
    assert "Traceback" not in said and len(said.strip().splitlines()) == 1, said

    go.write_text("")
    assert fleet.wait_terminal(job_id, timeout_s=120) is JobState.SUCCEEDED
    assert "done" in fleet.output(job_id)
    assert_clean(fleet, job_id)
    [assignment] = fleet.billing()  # one VM, released once its job ended
    assert assignment["unassigned_at"] is not None
    for forged, raw in before.items():  # untouched: no owner, no lock, nothing stopped for it
        assert fleet.ledger.r.hgetall(fleet.ledger.keys.job(forged)) == raw
        assert not fleet.ledger.r.exists(fleet.ledger.keys.lock(forged))
    kinds = {(e.job, e.kind) for e in events.read(fleet.ledger.r, fleet.ledger.keys)}
    assert not {kind for job, kind in kinds if job in before} - {"adopt"}, kinds
    assert (job_id, "janitor-stop") not in kinds and (job_id, "adopt") not in kinds
