"""Records as the ledger reads them back: whose VM a record names (`worker.records.vms`, the check
before any adoption or release), a record that is not its job's (damaged, never acted on), and
fields outside their grammar left out."""

from __future__ import annotations

import pytest

from tests.factories import SESSION, make_spec
from worker.records.record import DamagedRecord, decode_history, decode_record
from worker.records.vms import vm_problem
from worker.spec import encode_spec

JOB, OTHER = "0123456789abcdef", "fedcba9876543210"
EP = "gpu-0123456789"

CASES = [
    # (case, name, endpoint, what the endpoints index maps the endpoint to, a problem?)
    ("its own VM", SESSION, EP, JOB, None),
    ("no VM yet", None, None, None, None),
    ("a name, no endpoint yet", SESSION, None, None, None),
    ("another job's endpoint", SESSION, EP, OTHER, f"maps {EP} to job '{OTHER}'"),
    ("an endpoint no job was assigned", SESSION, EP, None, f"maps {EP} to no job"),
    ("a name that is not colabq's", "my-notebook", EP, JOB, "is not one of colabq's"),
    ("a name that is a path", "../../x", EP, JOB, "is not one of colabq's"),
    ("an endpoint that is a path", SESSION, "../e", JOB, "is not an endpoint"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "name", "ep", "owner", "problem"), CASES, ids=[c[0] for c in CASES]
)
def test_only_the_jobs_own_vm_is_acted_on(
    case: str, name: str | None, ep: str | None, owner: str | None, problem: str | None
) -> None:
    got = vm_problem(JOB, name, ep, owner, "colabq-")
    assert (got is None) is (problem is None), got
    assert problem is None or (got is not None and problem in got), got


def raw(spec_job: str = JOB, **fields: str) -> dict[bytes, bytes]:
    d = {"spec": encode_spec(make_spec(job_id=spec_job)), "state": "running", "owner": "o",
         "created_at": "1", "updated_at": "2", **fields}  # fmt: skip
    return {k.encode(): v.encode() for k, v in d.items()}


def test_a_record_is_its_jobs_or_damaged() -> None:
    rec = decode_record(JOB, raw(session=SESSION, endpoint=EP, worker="w@h"))
    assert (rec.get("session"), rec.get("endpoint"), rec.get("worker")) == (SESSION, EP, "w@h")
    with pytest.raises(DamagedRecord, match=f"its spec is job {OTHER}'s"):
        decode_record(JOB, raw(OTHER))  # a copy of another job's record under this id
    for bad in ({b"state": b"exploded"}, {b"spec": b"{"}, {b"created_at": b"x"},
                {b"reason": b"\xff"}):  # fmt: skip
        with pytest.raises(DamagedRecord):
            decode_record(JOB, {**raw(), **bad})
    d = raw()
    del d[b"spec"]
    with pytest.raises(DamagedRecord, match="no spec field"):
        decode_record(JOB, d)


def test_names_outside_their_grammar_are_left_out() -> None:
    rec = decode_record(JOB, raw(session="../../x", endpoint="a b", worker="w\x00"))
    assert rec.get("session") is None and rec.get("endpoint") is None and rec.get("worker") is None


def test_history_entries_that_do_not_parse_are_skipped() -> None:
    good = b'{"state": "queued", "at": 1.0, "reason": "submitted"}'
    got = decode_history(JOB, [good, b"{", b"[]", b'{"state": "exploded", "at": 1, "reason": ""}',
                               b"\xff", good])  # fmt: skip
    assert [h.reason for h in got] == ["submitted", "submitted"]
