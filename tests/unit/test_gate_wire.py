"""The gate's wire contract (`worker.gate.wire`): what a request may say, and the known errors a
reply carries back as the same class with the same line."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from tests.factories import make_spec
from worker.errors import (
    ColabqError,
    ConfigError,
    JobNotFound,
    LedgerError,
    RunNameInUse,
    SpecError,
    UserInputError,
)
from worker.gate import wire

RID = "0123456789abcdef" * 2


def request(body: dict[str, object], **extra: object) -> str:
    return json.dumps({"rid": RID, "host": "laptop", "local_user": "alice", "body": body, **extra})


def test_every_op_reads_back_as_itself() -> None:
    spec = make_spec()
    bodies: list[wire.Body] = [
        wire.Submit(specs=(spec, spec), after=((), (wire.Dep(job="@0"),)), allow_same_run=True),
        wire.Cancel(jobs=("0123456789abcdef.alice",), reason="stop"),
        wire.CancelSweep(sweep="sw0123456789ab.alice"),
        wire.Retry(job="0123456789abcdef"),
        wire.Note(jobs=("0123456789abcdef",), kind="clean", reason="colabq clean run"),
    ]
    for body in bodies:
        req = wire.Request(rid=RID, host="laptop", local_user="alice", body=body)
        assert wire.Request.model_validate_json(req.model_dump_json()) == req


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (request({"op": "cancel", "jobs": ["x"]}), "a job id outside its grammar"),
        (request({"op": "cancel", "jobs": ["0123456789abcdef.bob:history"]}), "a key in an id"),
        (request({"op": "cancel", "jobs": []}), "no job"),
        (request({"op": "cancel", "jobs": ["0123456789abcdef"], "user": "bob"}), "a user field"),
        (request({"op": "cancel", "jobs": ["0123456789abcdef"]}, user="bob"), "a user field"),
        (request({"op": "cancel", "jobs": ["0123456789abcdef"], "reason": "a\nb"}), "two lines"),
        (request({"op": "cancel_sweep", "sweep": "sw1.alice"}), "a sweep id outside its grammar"),
        (request({"op": "flush"}), "an unknown op"),
        (request({"op": "retry", "job": "0123456789abcdef"}).replace(RID, "../x"), "a bad rid"),
        (
            request({"op": "note", "jobs": ["0123456789abcdef"], "kind": "state", "reason": "x"}),
            "a note of a kind other than clean",
        ),
    ],
)
def test_a_request_outside_the_contract_is_refused(raw: str, why: str) -> None:
    with pytest.raises(ValidationError):
        wire.Request.model_validate_json(raw)


def test_a_dependency_names_an_earlier_job_of_the_batch_or_a_job_id() -> None:
    spec = make_spec()
    with pytest.raises(ValidationError, match="not an earlier job"):
        wire.Submit(specs=(spec, spec), after=((wire.Dep(job="@1"),), ()))
    with pytest.raises(ValidationError, match="one list of dependencies per spec"):
        wire.Submit(specs=(spec, spec), after=((),))
    with pytest.raises(ValidationError):
        wire.Dep(job="@x")
    assert wire.Dep(job="0123456789abcdef.bob", cond="notok").cond == "notok"


@pytest.mark.parametrize(
    "exc",
    [
        RunNameInUse("mnist", "0123456789abcdef.bob", "RUNNING", "local:model:/s/mnist"),
        SpecError("wall_cap_s", "must be at most 86400"),
        JobNotFound("0123456789abcdef"),
        ConfigError("Invalid setting COLABQ_X: no."),
        UserInputError("--after 1234: job 1234 belongs to bob; --after names your own jobs."),
        LedgerError("The ledger refused."),
        ColabqError("Something else."),
    ],
)
def test_a_known_error_comes_back_as_its_class_with_its_line(exc: ColabqError) -> None:
    reply = wire.Reply(rid=RID, result=wire.refusal(exc))
    back = wire.Reply.model_validate_json(reply.model_dump_json()).result
    assert isinstance(back, wire.Refused)
    with pytest.raises(ColabqError) as raised:
        wire.raise_refused(back)
    assert type(raised.value) is type(exc)
    assert raised.value.advice() == exc.advice()


def test_a_refusal_without_its_fields_is_still_one_line_of_its_family() -> None:
    bare = wire.Refused(error="run_name_in_use", message="Run 'x' already has a live job.")
    with pytest.raises(UserInputError, match="already has a live job"):
        wire.raise_refused(bare)
