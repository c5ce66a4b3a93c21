"""`colabq submit --hub-input NAME=URI` end to end, through a real worker on the emulator: the VM
downloads each input before the job starts, `hf://` from the local Hub server (a private dataset,
with the worker's read token) and `https://` from a local TLS server (its certificate given to
the emulated VM as SSL_CERT_FILE); the job, run as the VM's unprivileged user, reads them at
$COLABQ_INPUT_<NAME> and gets `--hub-input NAME=URI` as its arguments. A job one of whose inputs
is missing ends FAILED before its script runs, in one line naming the input, its VM released."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from producer.cli import app
from tests.httpsfiles import HttpsFiles, https_files
from tests.hub import conftest as hub_conftest
from tests.hub.conftest import Hub, worker_hub_env
from tests.integration.conftest import Fleet
from worker.states import JobState

_client_env = hub_conftest._client_env
make_hub = hub_conftest.make_hub
hub = hub_conftest.hub

pytestmark = pytest.mark.integration
runner = CliRunner()
WAIVE = ["--waive", "config-diff", "--waive", "paths", "--waive", "monitoring"]
JOB = """\
echo "args: $*"
echo "uid: $(id -u)"
echo "data: $(tr '\\n' ' ' < "$COLABQ_INPUT_DATA")"
echo "vocab: $(tr '\\n' ' ' < "$COLABQ_INPUT_VOCAB")"
"""


@pytest.fixture
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpsFiles]:
    with https_files(tmp_path_factory.mktemp("https"), {"vocab.txt": b"a b c\n"}) as server:
        yield server


@pytest.fixture
def fleet_env_extra(
    hub: Hub, web: HttpsFiles, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    token = tmp_path_factory.mktemp("secret") / "hf_token"
    token.write_text(hub.tokens["alice_read"])
    token.chmod(0o600)
    # The emulated VM trusts the test server's certificate, as a Colab VM trusts a real one.
    return {**worker_hub_env(hub.url, token), "SSL_CERT_FILE": str(web.cafile),
            "COLAB_EMU_PASSTHROUGH": "SSL_CERT_FILE"}  # fmt: skip


def submit(fleet: Fleet, name: str, *inputs: str) -> str:
    script = fleet.root / f"{name}.sh"
    script.write_text(JOB)
    args = [a for item in inputs for a in ("--hub-input", item)]
    result = runner.invoke(
        app,
        ["submit", str(script), "--name", name, "--wall", "10m", "--idle", "5s",
         "--local-store", str(fleet.root / "store"), "--json", *WAIVE, *args],
        env=fleet.env,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return str(json.loads(result.stdout)["jobs"][0]["job_id"])


def report(fleet: Fleet, job_id: str) -> dict[str, object]:
    return dict(json.loads(fleet.ledger.get(job_id).get("report") or "{}"))


def test_inputs_reach_the_job_and_a_missing_one_fails_it_before_it_runs(
    fleet: Fleet, hub: Hub, web: HttpsFiles
) -> None:
    data = hub.private_dataset()
    vocab = web.url("vocab.txt")
    ok = submit(fleet, "coco-inputs-hf-and-https", f"DATA={data}", f"VOCAB={vocab}")
    assert fleet.wait_terminal(ok, timeout_s=120) is JobState.SUCCEEDED, fleet.ledger.get(ok).reason
    out = [ln.rstrip() for ln in fleet.output(ok)]
    assert f"args: --hub-input DATA={data} --hub-input VOCAB={vocab}" in out, out
    assert "data: a,b 1,2" in out and "vocab: a b c" in out, out
    assert any(ln.startswith("colabq: 2 input(s) ready in ") for ln in out), out
    uid = int(next(ln for ln in out if ln.startswith("uid: ")).split()[1])
    if os.geteuid() == 0:
        assert uid != 0  # the job's unprivileged user read them
    inputs = report(fleet, ok)["inputs"]
    assert isinstance(inputs, dict) and inputs["ready"] is True
    assert inputs["inputs"]["VOCAB"]["bytes"] == 6 and inputs["inputs"]["DATA"]["uri"] == data
    # No credential ever went to another host (the VM's GET, and the pre-flight's look).
    assert ("vocab.txt", False) in web.asked and not any(auth for _, auth in web.asked)

    lost = web.url("lost.bin")
    bad = submit(fleet, "coco-inputs-one-missing", f"DATA={data}", f"LOST={lost}")
    assert fleet.wait_terminal(bad, timeout_s=120) is JobState.FAILED
    reason = fleet.ledger.get(bad).reason
    assert reason == (
        f"the job's inputs are not ready: input LOST ({lost}) is missing (HTTP 404); "
        "the job did not run"
    ), reason
    assert not any(ln.startswith("args: ") for ln in fleet.output(bad))  # its script never ran
    assert report(fleet, bad)["runtime"].startswith("released")  # type: ignore[union-attr]
    assert all(b["unassigned_at"] is not None for b in fleet.billing())  # nothing still billed
