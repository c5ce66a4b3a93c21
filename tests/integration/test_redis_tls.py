"""Across networks the deployment's Redis speaks TLS (`rediss://`): a job end to end, every
process of colabq (submit, the Celery worker, its watchdog and attach client) on a TLS Redis
behind a password, its certificate checked against the CA the URL names."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from producer.broker import free_port
from tests.conftest import make_certificate, start_redis_server
from tests.integration.conftest import Fleet
from tests.integration.test_run_on_vm import submit
from worker.states import JobState

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A TLS-only redis-server of this module's own (this overrides the suite's Redis)."""
    if shutil.which("redis-server") is None or shutil.which("openssl") is None:
        pytest.skip("redis-server and openssl are needed")
    root = tmp_path_factory.mktemp("tls")
    cert, key = make_certificate(root)
    port = free_port()
    conf = (
        f"port 0\ntls-port {port}\nbind 127.0.0.1\ntls-cert-file {cert}\ntls-key-file {key}\n"
        f"tls-ca-cert-file {cert}\ntls-auth-clients no\nrequirepass tls-test-password\n"
        f'save ""\nappendonly no\ndir {root}\n'
    )
    url = (
        f"rediss://:tls-test-password@127.0.0.1:{port}/0?ssl_cert_reqs=required&ssl_ca_certs={cert}"
    )
    proc = start_redis_server(conf, url)
    assert proc is not None, "the TLS redis-server did not start"
    yield url
    proc.kill()
    proc.wait()


def test_a_job_end_to_end_over_tls(fleet: Fleet, redis_url: str) -> None:
    assert redis_url.startswith("rediss://")
    plain = redis_url.replace("rediss://", "redis://").split("?")[0]
    with pytest.raises(redis.ConnectionError):  # nothing answers in clear text
        redis.Redis.from_url(plain, socket_timeout=2).ping()
    job_id = submit(fleet, "echo over-tls\n")
    assert fleet.wait_terminal(job_id) is JobState.SUCCEEDED
    assert "over-tls" in fleet.output(job_id)
    assert Path(fleet.root / "worker.log").read_text().count("tls-test-password") == 0
