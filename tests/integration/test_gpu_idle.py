"""A GPU that idles is stopped (issue 21), on the emulator through a worker: a job that wrote its
checkpoint and then hangs, its GPU at 0 % (the emulated nvidia-smi; `colab-emu set-gpu --util`),
with --gpu-idle 2s ends FAILED with "GPU idle" in the reason, its checkpoint synced."""

from __future__ import annotations

import pytest

from tests.integration.conftest import Fleet
from tests.integration.test_run_on_vm import RUN, submit
from worker.states import JobState

pytestmark = pytest.mark.integration


def test_a_job_whose_gpu_idles_is_stopped_after_a_final_sync(fleet: Fleet) -> None:
    script = "mkdir -p ckpt && echo 7 > ckpt/step\necho 'checkpoint written'\nsleep 300\n"
    job_id = submit(fleet, script, "--sync", "ckpt", "--expect", "ckpt", "--gpu-idle", "2s")
    assert fleet.wait_terminal(job_id, timeout_s=60) is JobState.FAILED
    rec = fleet.ledger.get(job_id)
    assert rec.reason is not None and rec.reason.startswith("GPU idle 2s (below 5 % since ")
    assert (fleet.root / "store" / RUN / "ckpt" / "step").read_text().strip() == "7"
    assert any("the GPUs stayed below 5% for 2s" in line for line in fleet.output(job_id))
