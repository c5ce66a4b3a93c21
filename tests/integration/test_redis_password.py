"""The deployment's Redis needs a password (what several machines sharing one Redis must run):
the whole integration suite runs against one, and its password is never printed."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
import redis
from typer.testing import CliRunner

from producer.cli import app
from tests.integration.conftest import Fleet
from tests.integration.test_run_on_vm import submit
from worker.errors import redacted_url
from worker.states import JobState

pytestmark = pytest.mark.integration


def test_the_suite_runs_against_a_redis_that_needs_a_password(redis_url: str) -> None:
    parts = urlsplit(redis_url)
    if not parts.password:
        pytest.skip("COLABQ_TEST_REDIS_URL names a Redis without a password")
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host=parts.hostname or "", port=parts.port or 6379).ping()


def test_a_job_end_to_end_and_the_password_never_printed(fleet: Fleet, redis_url: str) -> None:
    password = urlsplit(redis_url).password
    if not password:
        pytest.skip("COLABQ_TEST_REDIS_URL names a Redis without a password")
    job_id = submit(fleet, "echo through-a-password\n")
    assert fleet.wait_terminal(job_id) is JobState.SUCCEEDED
    assert "through-a-password" in fleet.output(job_id)
    status = CliRunner().invoke(app, ["status", job_id], env=fleet.env).output
    wrong = redis_url.replace(password, "not-the-password")
    refused = CliRunner().invoke(app, ["status"], env={**fleet.env, "COLABQ_REDIS_URL": wrong})
    assert refused.exit_code == 3 and "***" in refused.output, refused.output
    for text in (status, refused.output, (fleet.root / "worker.log").read_text()):
        assert password not in text
    for line in fleet.ledger.read_log(job_id, count=10_000):
        assert password not in line.text


def test_redacted_url() -> None:
    assert redacted_url("redis://:s3cret@h:6380/2") == "redis://:***@h:6380/2"
    assert redacted_url("rediss://user:s3cret@h/0") == "rediss://user:***@h/0"
    assert redacted_url("redis://h:6379/0") == "redis://h:6379/0"
