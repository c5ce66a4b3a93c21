"""`colabq.Client` end to end: a job submitted from Python runs on a real worker driving the
Colab emulator; one client waits for it while another follows its log, and both see it end."""

from __future__ import annotations

import threading

import pytest

from colabq import Client, JobState
from tests.integration.conftest import Fleet
from worker.settings import load_settings

pytestmark = pytest.mark.integration

RUN = "mnist-mlp-bs64-lr1e-3-api"


def test_a_job_submitted_from_python_succeeds_and_its_log_is_read(fleet: Fleet) -> None:
    env = fleet.env
    settings = load_settings(
        redis_url=env["COLABQ_REDIS_URL"],
        key_prefix=env["COLABQ_KEY_PREFIX"],
        queue_prefix=env["COLABQ_QUEUE_PREFIX"],
    )
    script = fleet.root / "job.sh"
    script.write_text('for i in 1 2 3; do echo "line-$i"; sleep 0.2; done\n')
    with Client(settings=settings) as client, Client(settings=settings) as follower:
        sub = client.submit(
            script, name=RUN, repo_dir=fleet.root, local_store=fleet.root / "store", idle="5s",
            waive=["config-diff", "paths", "monitoring"],
        )  # fmt: skip
        followed: list[str] = []
        reader = threading.Thread(
            target=lambda: followed.extend(follower.logs(sub.job_id, follow=True)), daemon=True
        )
        reader.start()
        info = client.wait(sub.job_id, timeout=90, poll_s=0.5)
        reader.join(timeout=10)
        assert not reader.is_alive()
        assert info.state is JobState.SUCCEEDED, info.reason
        assert info.exit_code == 0 and info.report is not None and info.held_s > 0
        assert info.history[-1].state is JobState.SUCCEEDED
        lines = list(client.logs(sub.job_id))
    job_lines = [ln for ln in lines if ln.startswith("line-")]
    assert job_lines == ["line-1", "line-2", "line-3"]
    assert followed == lines  # followed live, every line once, in order
