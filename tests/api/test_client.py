"""`colabq.Client` against the real Redis, on a private key and queue prefix, with nothing
consuming the queue: submit (a dry run, a real enqueue, a job file with a sweep), a failed
pre-flight that enqueues nothing, status, cancel of a queued job, wait, logs and the errors."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TypedDict

import pytest
import redis

from colabq import (
    Client,
    JobNotFound,
    JobState,
    PreflightFailed,
    SubmitOptions,
    UserInputError,
    WaitTimeout,
)
from tests.cli.training_repo import GOOD_NAME, RISKY, make_repo
from tests.gatethread import written
from worker.settings import Settings


class Common(TypedDict):
    commit: str
    seconds_per_epoch: float


# The repository's other checks pass; these two settle what the test does not measure.
COMMON: Common = {"commit": "abc1234", "seconds_per_epoch": 600.0}


def _keys(r: redis.Redis, prefix: str) -> list[bytes]:
    return written(r, prefix)


def _a_queued_job(client: Client, tmp_path: Path) -> str:
    repo = make_repo(tmp_path / "repo")
    sub = client.submit(
        repo / "train.sh", name=GOOD_NAME, repo_dir=repo, local_store=tmp_path / "store", **COMMON
    )
    return sub.job_id


def _queued(r: redis.Redis, settings: Settings) -> int:
    return int(r.llen(f"{settings.queue_prefix}gpu.t4"))


def test_a_dry_run_checks_and_plans_without_redis(tmp_path: Path, settings: Settings) -> None:
    repo = make_repo(tmp_path / "repo")
    nowhere = settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"})
    with Client(settings=nowhere) as client:
        sub = client.submit(
            repo / "train.sh", name=GOOD_NAME, repo_dir=repo, local_store=tmp_path / "store",
            gpu=["A100", "L4"], wall=2 * 3600, dry_run=True, **COMMON,
        )  # fmt: skip
    assert sub.dry_run and sub.job_ids == ()
    (job,) = sub.jobs
    assert (job.run_name, job.gpu, job.wall_cap_s, job.job_id) == (GOOD_NAME, "A100", 7200, None)
    assert job.queue == f"{settings.queue_prefix}gpu.a100"
    assert [r.ok for r in sub.preflight] == [True]
    assert sub.output_repo == "local destination: not a Hub repo"
    with pytest.raises(ValueError, match="dry run"):
        _ = sub.job_id


def test_submit_enqueues_a_queued_job_that_status_reads(
    tmp_path: Path, client: Client, settings: Settings, redis_client: redis.Redis
) -> None:
    repo = make_repo(tmp_path / "repo")
    sub = client.submit(
        str(repo / "train.sh"), name=GOOD_NAME, repo_dir=repo, local_store=tmp_path / "store",
        env={"LR": "3e-4"}, sync=["ckpt"], **COMMON,
    )  # fmt: skip
    job_id = sub.job_id
    assert sub.jobs[0].created and sub.jobs[0].state is JobState.QUEUED and sub.sweep is None
    assert sub.warnings == (
        f"no live worker serves {settings.queue_prefix}gpu.t4: the job waits until one starts "
        "(`colabq workers`)",
    )
    record = client.ledger.get(job_id)
    assert record.state is JobState.QUEUED and record.spec.env == {"LR": "3e-4"}
    assert record.spec.preflight_digest == sub.preflight[0].digest
    assert _queued(redis_client, settings) == 1

    info = client.status(job_id[:8])
    assert (info.job_id, info.state, info.run_name, info.gpu) == (
        job_id, JobState.QUEUED, GOOD_NAME, "T4",
    )  # fmt: skip
    assert not info.terminal and info.report is None and info.reason == "submitted"
    assert info.data["run"] == GOOD_NAME and info.history[0].state is JobState.QUEUED
    assert [j.job_id for j in client.status()] == [job_id]
    assert [j.job_id for j in client.status(mine=True, state="live")] == [job_id]
    assert client.status(state="ended") == []
    assert client.status(run="other-*") == []

    # The same submission again is the same job (its idempotency key), sent once.
    again = client.submit(
        repo / "train.sh", name=GOOD_NAME, repo_dir=repo, local_store=tmp_path / "store",
        env=["LR=3e-4"], sync="ckpt", **COMMON,
    )  # fmt: skip
    assert again.job_id == job_id and not again.jobs[0].created
    assert _queued(redis_client, settings) == 1


def test_a_failed_preflight_raises_with_its_findings_and_enqueues_nothing(
    tmp_path: Path, client: Client, settings: Settings, redis_client: redis.Redis
) -> None:
    repo = make_repo(tmp_path / "repo", RISKY)
    with pytest.raises(PreflightFailed) as caught:
        client.submit(
            repo / "train.sh", name=GOOD_NAME, repo_dir=repo, local_store=tmp_path / "store",
            **COMMON,
        )  # fmt: skip
    failed = caught.value
    assert failed.failed == ("config-diff",)
    assert [f.check.value for f in failed.findings] == ["config-diff"]
    assert failed.report is not None and not failed.report.ok
    assert str(failed).startswith("Pre-flight failed (config-diff)")
    assert "--waive config-diff" in str(failed) and "\n" not in str(failed)
    assert _keys(redis_client, settings.key_prefix) == []


def test_a_job_file_with_a_sweep_and_arguments_over_its_keys(
    tmp_path: Path, client: Client
) -> None:
    make_repo(tmp_path / "repo")
    job_file = tmp_path / "job.yaml"
    job_file.write_text(
        f"script: repo/train.sh\nname: {GOOD_NAME}\nrepo_dir: repo\nlocal_store: store\n"
        "wall: 6h\ncommit: abc1234\nseconds_per_epoch: 600\n"
        "sweep:\n  env.SEED: [1, 2]\n"
    )
    sub = client.submit(job_file=job_file, wall="3h", sweep={"gpu": ["T4", "L4"]})
    assert len(sub.job_ids) == 4 and sub.jobs[0].swept == {"env.SEED": "1", "gpu": "T4"}
    specs = [client.ledger.get(j).spec for j in sub.job_ids]
    assert {s.wall_cap_s for s in specs} == {3 * 3600}  # the argument, not the file's 6h
    assert sorted((s.env["SEED"], s.gpu.value) for s in specs) == [
        ("1", "L4"), ("1", "T4"), ("2", "L4"), ("2", "T4"),
    ]  # fmt: skip
    assert sub.sweep is not None and sub.sweep.startswith("sw")
    with pytest.raises(ValueError, match="4-job"):
        _ = sub.job_id
    assert [j.job_id for j in client.sweep(sub.sweep)] == list(sub.job_ids)
    client.cancel(sub.job_ids[0])
    assert {c.job_id for c in client.cancel_sweep(sub.sweep)} == set(sub.job_ids[1:])
    assert {j.state for j in client.sweep(sub.sweep)} == {JobState.CANCELLED}


def test_submit_takes_every_option_of_the_command() -> None:
    import inspect

    from producer.jobfile import FIELDS

    named = set(inspect.signature(Client.submit).parameters) | set(SubmitOptions.__annotations__)
    assert set(FIELDS) - named == set()  # a new `colabq submit` option belongs in SubmitOptions


def test_bad_input_is_one_error_and_changes_nothing(
    tmp_path: Path, client: Client, settings: Settings, redis_client: redis.Redis
) -> None:
    repo = make_repo(tmp_path / "repo")
    store = tmp_path / "store"
    with pytest.raises(UserInputError, match="--wall: '90' has no unit"):
        client.submit(repo / "train.sh", name=GOOD_NAME, local_store=store, wall="90")
    with pytest.raises(UserInputError, match="unknown key 'walll'"):
        client.submit(repo / "train.sh", name=GOOD_NAME, local_store=store, walll="1h")  # type: ignore[call-arg]
    with pytest.raises(UserInputError, match="Name the run"):
        client.submit(repo / "train.sh", local_store=store)
    with pytest.raises(UserInputError, match="script"):
        client.submit(name=GOOD_NAME)
    assert _keys(redis_client, settings.key_prefix) == []


def test_cancel_of_a_queued_job_ends_it_and_wait_returns_it(tmp_path: Path, client: Client) -> None:
    job_id = _a_queued_job(client, tmp_path)
    with pytest.raises(WaitTimeout) as late:
        client.wait(job_id, timeout=0.2, poll_s=0.05)
    assert isinstance(late.value, TimeoutError) and late.value.state is JobState.QUEUED

    done = client.cancel(job_id, reason="not needed")
    assert (done.job_id, done.state_before, done.result) == (job_id, JobState.QUEUED, "cancelled")
    assert done.message.startswith(f"Job {job_id} cancelled")
    info = client.wait(job_id, timeout=5)
    assert info.state is JobState.CANCELLED and info.terminal and info.reason == "not needed"
    assert client.cancel(job_id).result == "already_over"
    assert [j.job_id for j in client.status(state="cancelled")] == [job_id]


def test_logs_reads_every_line_or_those_since_a_time(tmp_path: Path, client: Client) -> None:
    job_id = _a_queued_job(client, tmp_path)
    stream = client.ledger.keys.log(job_id)
    # Explicit entry ids (milliseconds): 1500 lines at t=1 s (more than a read returns at
    # once), then two at t=5 s.
    for i in range(1500):
        client.ledger.r.xadd(stream, {"line": f"early-{i}", "stream": "out"}, id=f"1000-{i + 1}")
    client.ledger.r.xadd(stream, {"line": "late-1", "stream": "out"}, id="5000-0")
    client.ledger.r.xadd(stream, {"line": "late-2", "stream": "out"}, id="5000-1")
    lines = list(client.logs(job_id))
    assert len(lines) == 1502 and lines[0] == "early-0" and lines[-1] == "late-2"
    assert list(client.logs(job_id, since=5.0)) == ["late-1", "late-2"]
    assert list(client.logs(job_id, since="1h")) == []  # these lines are from 1970


def test_lookups_and_arguments_fail_as_the_cli_does(client: Client, redis_url: str) -> None:
    with pytest.raises(JobNotFound, match="No job 'feedface'"):
        client.status("feedface")
    with pytest.raises(JobNotFound):
        client.cancel("feedface")
    with pytest.raises(UserInputError, match="filter the list"):
        client.status("feedface", mine=True)  # type: ignore[call-overload]
    with pytest.raises(UserInputError, match="not both"):
        Client(redis_url, settings=client.settings)
    with pytest.raises(UserInputError, match="--state 'nope'"):
        client.status(state="nope")
    started = time.monotonic()
    with pytest.raises(JobNotFound):
        client.wait("feedface", timeout=10)
    assert time.monotonic() - started < 5
