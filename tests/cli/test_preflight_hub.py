"""`hf://` inputs in the pre-flight: checked on the local Hub server with this machine's token;
a Hub error maps to fail (missing, empty, refused) or skip (could not ask), never to pass."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from producer.cli import app
from producer.preflight.hub_inputs import HubInputChecker
from producer.preflight.remote import RemoteState
from tests.cli.training_repo import GOOD_NAME, QUIET_ENV, make_repo
from tests.hub import conftest as hub_conftest
from tests.hub.conftest import Hub
from worker.errors import (
    HubAuthError,
    HubEmptyArtifact,
    HubNotFound,
    HubUnavailable,
    HubUriError,
)

# The local Hub server's fixtures, shared with tests/hub (its client environment is autouse).
_client_env = hub_conftest._client_env
make_hub = hub_conftest.make_hub
hub = hub_conftest.hub

runner = CliRunner()


class FakeStore:
    def __init__(self, outcome: int | Exception) -> None:
        self.outcome = outcome

    def exists_nonempty(self, uri: str) -> int:
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


URI = "hf://datasets/alice/ds/train.csv"
CASES = [
    ("present", 1234, RemoteState.EXISTS, "1234 bytes"),
    ("missing", HubNotFound(URI), RemoteState.MISSING, "Not on the Hub"),
    ("empty", HubEmptyArtifact(URI), RemoteState.MISSING, "holds no data"),
    ("refused", HubAuthError("alice/ds", 401, "bad"), RemoteState.MISSING, "token"),
    ("bad uri", HubUriError("hf://", "no repo"), RemoteState.MISSING, "Bad Hub URI"),
    ("hub down", HubUnavailable("lookup", 2, 503, "x"), RemoteState.UNCHECKABLE, "could not"),
    ("no client", ImportError("huggingface_hub"), RemoteState.UNCHECKABLE, "could not"),
]


@pytest.mark.parametrize(("case", "outcome", "state", "phrase"), CASES, ids=[c[0] for c in CASES])
def test_hub_answers_map_to_remote_states(
    case: str, outcome: int | Exception, state: RemoteState, phrase: str
) -> None:
    status = HubInputChecker(lambda: FakeStore(outcome))(URI)
    assert status.state is state and phrase in status.detail


def test_a_hub_that_does_not_answer_is_not_checked_within_the_bound() -> None:
    release = threading.Event()

    class Hanging:
        def exists_nonempty(self, uri: str) -> int:
            release.wait(5)
            return 1

    status = HubInputChecker(Hanging, timeout_s=0.2)(URI)
    release.set()
    assert (
        status.state is RemoteState.UNCHECKABLE and "did not answer within 0.2 s" in status.detail
    )


@pytest.fixture
def dataset(hub: Hub) -> Hub:
    hub.private_dataset()
    return hub


@pytest.mark.parametrize(
    ("uri", "token", "verdict"),
    [
        ("hf://datasets/alice/ds/train.csv", "alice_read", "pass"),
        ("hf://datasets/alice/ds/missing.csv", "alice_read", "fail"),
        ("hf://datasets/alice/ds/train.csv", None, "fail"),  # private, and no token here
        ("hf://datasets/alice/ds/train.csv", "bob_write", "fail"),  # another account's repo
    ],
)
def test_preflight_checks_hf_inputs_on_the_hub(
    dataset: Hub, tmp_path: Path, uri: str, token: str | None, verdict: str
) -> None:
    repo = make_repo(tmp_path / "repo")
    env = {**QUIET_ENV, "HF_ENDPOINT": dataset.url, "HF_HOME": str(tmp_path / "hf_home")}
    env["HF_TOKEN"] = dataset.tokens[token] if token else None
    result = runner.invoke(
        app,
        ["preflight", "--repo-dir", str(repo), "--name", GOOD_NAME, "--json",
         "--hub-input", f"data={uri}"],
        env=env,
    )  # fmt: skip
    paths = json.loads(result.stdout)["findings"][2]
    line = next(d for d in paths["details"] if uri in d)
    assert line.startswith(f"[{verdict}]"), line
    assert paths["verdict"] == verdict
    assert (result.exit_code == 0) is (verdict == "pass")
