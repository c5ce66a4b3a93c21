"""Fixtures for the Hub store's tests: the local Hub server of tests/hub (reused, not copied), a
`HubStore` with a fast retry policy and a recorded sleep, and a runner for the VM-side
`colabq_sync.py` as the wrapper runs it (a subprocess, the token only in `HF_TOKEN`).

The VM's `python3` is stood in for by this venv's interpreter: it has huggingface_hub, as Colab
images do.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.hub import conftest as hub_conftest
from tests.hub.conftest import Hub
from worker.spec import ArtifactDest
from worker.store.hub import HubStore, RetryPolicy

# The local Hub server's fixtures, shared with tests/hub (the client env one is autouse there too).
_client_env = hub_conftest._client_env
make_hub = hub_conftest.make_hub
hub = hub_conftest.hub

SYNC = Path(__file__).resolve().parents[2] / "worker" / "vm" / "colabq_sync.py"
FAST = RetryPolicy(attempts=3, base_s=0.01, cap_s=0.04)
SyncRun = Callable[..., subprocess.CompletedProcess[str]]


def hf_dest(
    repo: str = "alice/runs", prefix: str = "exp1", repo_type: str = "model"
) -> ArtifactDest:
    return ArtifactDest(kind="hf", repo=repo, repo_type=repo_type, prefix=prefix)  # type: ignore[arg-type]


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def store(hub: Hub, sleeps: list[float]) -> HubStore:
    return HubStore(hub.url, hub.tokens["alice_write"], retry=FAST, sleep=sleeps.append)


@pytest.fixture
def run_sync(hub: Hub, tmp_path: Path) -> SyncRun:
    """Run colabq_sync.py with `args` (+ --endpoint, fast backoff); `token=None` leaves HF_TOKEN
    unset."""

    def _run(*args: str, token: str | None, attempts: int = 3) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
        env |= {"HF_HOME": str(tmp_path / "vm_hf_home")}
        if token is not None:
            env["HF_TOKEN"] = token
        fast = ["--endpoint", hub.url, "--attempts", str(attempts), "--backoff-base-s", "0.05"]
        return subprocess.run(
            [sys.executable, str(SYNC), *args, *fast],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    return _run


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # huggingface_hub's own LFS PUT passes a file as `data=`; httpx2 warns about it, not about us.
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.filterwarnings("ignore:Use 'content=:DeprecationWarning"))
