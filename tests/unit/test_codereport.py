"""The job's code and environment in its report, from the VM's CODE and ENVIRONMENT sentinels
(as the forwarder records them: `exec_code`, `exec_environment`); a code or environment that was
not ready ends the job FAILED with the stage's one line, whatever the wrapper's exit."""

from __future__ import annotations

import json
from types import SimpleNamespace

import fakeredis
import pytest

from tests.factories import make_spec
from worker.clock import FakeClock
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.session import codereport
from worker.session.finish import Finishing
from worker.session.job import Finish
from worker.spec import CodeSpec
from worker.states import JobState

SHA = "0123456789abcdef0123456789abcdef01234567"
GIT = CodeSpec(mode="git", commit=SHA, remote="https://github.com/o/r.git", uv=True,
               python="3.11", repairs=("torch-cuda",))  # fmt: skip
TORCH = {"name": "torch-cuda", "found": "torch 2.5.0+cu128 is built for CUDA 12.8; ...",
         "repair": "uv pip install torch==2.5.0+cu124 ...", "applied": True}  # fmt: skip
PYTEST = {"name": "pytest", "found": "pytest on PATH is /usr/local/bin/pytest, ...",
          "repair": "uv pip install pytest==8.3.4", "applied": False}  # fmt: skip
ENV_OK = {"ok": True, "uv": "uv 0.13.9", "sync_s": 0.4, "python": "3.11.7",
          "driver_cuda": "12.4", "torch": "2.5.0+cu124", "torch_cuda": "12.4",
          "breakages": [TORCH, PYTEST]}  # fmt: skip


def watch(**sentinels: object) -> dict[str, str]:
    return {f"exec_{k}": json.dumps(v) for k, v in sentinels.items()}


@pytest.mark.parametrize(
    ("w", "why"),
    [
        (watch(code={"ok": True, "commit": SHA}, environment=ENV_OK), None),
        ({}, None),  # a job without code, or one whose stage never reported
        ({"exec_code": "not json"}, None),
        (
            watch(code={"ok": False, "reason": f"commit {SHA} could not be fetched from X: fatal"}),
            f"the job's code is not on the VM: commit {SHA} could not be fetched from X: fatal; "
            "the job did not run",
        ),
        (
            watch(code={"ok": True}, environment={"ok": False, "reason": "uv sync failed: e"}),
            "the job's environment is not ready: uv sync failed: e; the job did not run",
        ),
    ],
)
def test_not_ready_says_why_in_one_line(w: dict[str, str], why: str | None) -> None:
    assert codereport.not_ready(w) == why


def test_the_report_names_the_commit_and_each_breakage_with_its_repair() -> None:
    spec = make_spec(code=GIT, commit=SHA)
    w = watch(code={"ok": True, "commit": SHA, "fetch_s": 0.2}, environment=ENV_OK)
    code = codereport.code_report(spec, w)
    assert code == {"mode": "git", "commit": SHA, "source": "https://github.com/o/r.git",
                    "subdir": "", "on_vm": True, "fetch_s": 0.2, "reason": None}  # fmt: skip
    env = codereport.environment_report(spec, w)
    assert env is not None
    assert env["synced"] is True and env["python_pin"] == "3.11"
    assert env["repairs_opted_in"] == ["torch-cuda"] and env["driver_cuda"] == "12.4"
    assert env["breakages"] == [TORCH, PYTEST]


def test_a_job_the_vm_never_reached_has_its_code_but_nothing_from_the_vm() -> None:
    spec = make_spec(code=GIT, commit=SHA)
    assert codereport.code_report(spec, {})["on_vm"] is None  # type: ignore[index]
    env = codereport.environment_report(spec, {})
    assert env is not None and env["synced"] is None and env["breakages"] == []
    plain = make_spec()
    assert codereport.code_report(plain, {}) is None
    assert codereport.environment_report(plain, {}) is None
    no_uv = make_spec(code=GIT.model_copy(update={"uv": False}), commit=SHA)
    assert codereport.environment_report(no_uv, {}) is None


@pytest.mark.parametrize("stage", ["code", "environment"])
def test_the_runner_ends_a_job_whose_code_was_not_ready_failed(stage: str) -> None:
    ledger = Ledger(fakeredis.FakeRedis(), FakeClock(1000.0), Keys("t"), log_maxlen=100)
    spec = make_spec(code=GIT, commit=SHA)
    ledger.create(spec)
    failed = {"ok": False, "reason": "it broke"}
    sentinels = {stage: failed} if stage == "code" else {"code": {"ok": True}, stage: failed}
    ledger.record_watch(spec.job_id, {**watch(**sentinels), "exec_end": "1", "exec_done": "5"})
    run = Finishing.__new__(Finishing)
    run.spec, run.d, run.job_id = spec, SimpleNamespace(ledger=ledger), spec.job_id
    with pytest.raises(Finish) as ended:
        run._job_ended()
    assert ended.value.state is JobState.FAILED
    assert ended.value.reason.endswith("it broke; the job did not run")
