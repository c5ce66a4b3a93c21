"""Secrets the job cannot read, on the emulator through a real worker: the worker holds a canary
Hub token for the job's user (`COLABQ_HF_TOKEN_DIR/user/<name>`, chosen over its own
`COLABQ_HF_TOKEN_FILE`, another canary). A job that looks for either everywhere it can (its
environment, every file it can read under its HOME and the VM's root, the environment and
command line of every process it can read, the bundle) finds nothing while the wrapper's
uploader, holding the user's token, runs beside it; the same job asking for `secrets: [hf_token]`
finds the user's token (so the search can fail), and never the host's."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from producer.submit import enqueue
from tests.factories import make_spec
from tests.integration.conftest import Fleet
from tests.integration.test_canary import ProcScanner
from worker.spec import ArtifactDest
from worker.states import JobState

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        os.geteuid() != 0,
        reason="the job runs as an unprivileged user only under a root wrapper (Colab, CI)",
    ),
]
HOST_CANARY = "hf_host_canary_" + secrets.token_hex(12)
USER_CANARY = "hf_user_canary_" + secrets.token_hex(12)
USER = "canary-user"

# The job: the canaries come reversed (the job's environment must not hold them), and it reads
# for 2 s while the periodic sync's uploader (with the user's token) comes and goes.
SEEK = """\
mkdir -p out && echo r > out/r.txt
python3 - <<'PY'
import os, sys, time
needles = {w: os.environ["SEEK_" + w.upper()][::-1].encode() for w in ("host", "user")}
roots = [os.environ["HOME"], os.environ.get("COLAB_EMU_VM_ROOT") or "/content"]
hits, files, procs = set(), set(), set()
def look(where, data):
    hits.update(f"{w} token in {where}" for w, n in needles.items() if n in data)
for name, value in os.environ.items():
    look(f"environment {name}", value.encode())
bundle = os.path.join(roots[1], "content", "colabq-bundle.tar")
print("bundle:", "there" if os.path.exists(bundle) else "gone")
deadline = time.monotonic() + 2
while time.monotonic() < deadline:
    for root in roots:
        for folder, _, names in os.walk(root):
            for name in names:
                path = os.path.join(folder, name)
                try:
                    if os.path.getsize(path) < 1 << 24:
                        with open(path, "rb") as fh:
                            look(path, fh.read())
                        files.add(path)
                except OSError:
                    pass
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for what in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{what}", "rb") as fh:
                    look(f"/proc/{pid}/{what}", fh.read())
                procs.add(pid)
            except OSError:
                pass
    time.sleep(0.1)
print(f"canary: read {len(files)} files and {len(procs)} processes as uid {os.getuid()}")
for hit in sorted(hits):
    print("canary hit:", hit)
print(f"canary: {len(hits)} hits")
sys.exit(3 if hits else 0)
PY
"""


@pytest.fixture
def fleet_env_extra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    folder = tmp_path_factory.mktemp("tokens")
    host = folder / "hf_token"
    user = folder / "by" / "user" / USER
    user.parent.mkdir(parents=True)
    for path, canary in ((host, HOST_CANARY), (user, USER_CANARY)):
        path.write_text(canary + "\n")
        path.chmod(0o600)
    yield {"COLABQ_HF_TOKEN_FILE": str(host), "COLABQ_HF_TOKEN_DIR": str(folder / "by")}


def test_the_job_finds_no_token_unless_it_asks_for_it_by_name(fleet: Fleet) -> None:
    jobs = {}
    with ProcScanner(USER_CANARY) as scan:
        for name, asked in (("blind", ()), ("asks", ("hf_token",))):
            spec = make_spec(
                script=SEEK, run_name=f"canary-{name}", secrets=asked, sync_paths=("out",),
                sync_interval_s=1.0, submitted_by=f"{USER}@laptop",
                env={"SEEK_HOST": HOST_CANARY[::-1], "SEEK_USER": USER_CANARY[::-1]},
                artifact=ArtifactDest(kind="local", repo=str(fleet.root / "store"), prefix=name),
            )  # fmt: skip
            jobs[name] = enqueue(spec, fleet.ledger).job_id
        blind = fleet.wait_terminal(jobs["blind"])
        asks = fleet.wait_terminal(jobs["asks"])
    out = {name: "\n".join(fleet.output(job_id)) for name, job_id in jobs.items()}
    assert blind is JobState.SUCCEEDED, out["blind"]
    assert "canary: 0 hits" in out["blind"] and "bundle: gone" in out["blind"]
    read = out["blind"].split("canary: read ")[1].split()
    assert int(read[0]) > 5 and int(read[3]) > 5 and read[-1] not in ("0", "root"), read
    # The user's token was the uploader's, in the uploader's environment alone.
    assert scan.hits and all("colabq_sync.py" in c for c in scan.hits.values()), scan.hits
    # Asked for by name: the job's copy of the user's token (never the host's) is found.
    assert asks is JobState.FAILED, out["asks"]
    assert fleet.ledger.get(jobs["asks"]).get("exit_code") == "3"
    assert "canary hit: user token in environment" not in out["asks"]
    assert "canary hit: user token in" in out["asks"] and "host token" not in out["asks"]
    assert "/.colabq/hf-token" in out["asks"]
    logs = "\n".join(ln.text for ln in fleet.ledger.read_log(jobs["blind"]))
    assert "uploads use the user's Hub token" in logs and USER_CANARY not in logs
    assert Path(fleet.env["COLABQ_HF_TOKEN_DIR"], "user", USER).read_text().strip() == USER_CANARY
