"""Secrets the job cannot read, on the emulator through a real worker. The worker host holds
canaries: the deployment's Hub token (`COLABQ_HF_TOKEN_FILE`), the job's user's own token and
another user's (`COLABQ_HF_TOKEN_DIR/user/<name>`), a destination's token (`dest/<owner>__<repo>`,
listed for the job's user) and the hosts' git credential, which travels to the VM for the job's
`code: git` fetch. A job that hunts for every one of them (its environment, every file it can
read under its HOME and the VM's root, the environment and command line of every process it can
read, the bundle) finds none while the wrapper's uploader runs beside it; asking for
`secrets: [hf_token]` it finds exactly one: its user's own token for a local destination, the
destination's for its Hub destination (so the hunt can find what is there). A job naming a
repo whose token is another user's is refused before allocation, in one line."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from producer.submit import enqueue
from tests.factories import make_spec
from tests.gitremote import make_remote
from tests.hub import conftest as hub_conftest
from tests.hub.conftest import Hub, worker_hub_env
from tests.integration.conftest import Fleet
from tests.integration.test_canary import ProcScanner
from worker.errors import UserInputError
from worker.spec import ArtifactDest, CodeSpec, JobSpec
from worker.states import JobState

_client_env = hub_conftest._client_env
make_hub = hub_conftest.make_hub
hub = hub_conftest.hub

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        os.geteuid() != 0,
        reason="the job runs as an unprivileged user only under a root wrapper (Colab, CI)",
    ),
]
CANARIES = {
    "host": "hf_host_canary_" + secrets.token_hex(12),
    "user": "hf_user_canary_" + secrets.token_hex(12),
    "other": "hf_other_canary_" + secrets.token_hex(12),
    "dest": "hf_dest_canary_" + secrets.token_hex(12),
    "git": "ghp_git_canary_" + secrets.token_hex(12),
}
USER, OTHER = "canary-user", "other-user"
SHARED, OTHERS = "colabq-org/shared", "colabq-org/others"  # listed for USER; for OTHER only

# The job: the canaries come reversed (the job's environment must not hold them), and it reads
# for 2 s while the periodic sync's uploader (with the job's token) comes and goes.
SEEK = """\
mkdir -p out && echo r > out/r.txt
python3 - <<'PY'
import os, sys, time
needles = {w: os.environ["SEEK_" + w.upper()][::-1].encode()
           for w in ("host", "user", "other", "dest", "git")}
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


def secret_file(path: Path, text: str, mode: int = 0o600) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    path.chmod(mode)
    return path


@pytest.fixture
def fleet_env_extra(hub: Hub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    folder = tmp_path_factory.mktemp("tokens")
    by = folder / "by"
    host = secret_file(folder / "hf_token", CANARIES["host"])
    secret_file(by / "user" / USER, CANARIES["user"])
    secret_file(by / "user" / OTHER, CANARIES["other"])
    for repo, token, listed in ((SHARED, CANARIES["dest"], USER), (OTHERS, "hf_x", OTHER)):
        name = repo.replace("/", "__")
        secret_file(by / "dest" / name, token)
        secret_file(by / "dest" / f"{name}.users", listed, 0o644)
    hub.admin.set_token(CANARIES["dest"], user="org-bot", role="write", orgs=["colabq-org"])
    hub.admin.set_token(CANARIES["user"], user=USER, role="write")  # its whoami: canary-user
    creds = secret_file(folder / "git-credentials", f"https://colabq:{CANARIES['git']}@git.invalid")
    yield {
        **worker_hub_env(hub.url, host),
        "COLABQ_HF_TOKEN_DIR": str(by),
        "COLABQ_GIT_CREDENTIALS_FILE": str(creds),
    }


Run = tuple[dict[str, str], dict[str, JobState], dict[str, str]]  # ids, ends, outputs


def canary_spec(root: Path, name: str, asked: tuple[str, ...], dest: ArtifactDest) -> JobSpec:
    """A job as USER submits it: a `code: git` job (the git credential goes to the VM) that
    hunts the canaries, with its secrets and destination."""
    remote = make_remote(root / "git" / name)
    code = CodeSpec(mode="git", commit=remote.pushed, remote=str(remote.bare))
    return make_spec(
        script=SEEK, run_name=f"canary-{name}", secrets=asked, sync_paths=("out",),
        sync_interval_s=1.0, submitted_by=f"{USER}@laptop", code=code, commit=code.commit,
        artifact=dest.model_copy(update={"prefix": name}),
        env={f"SEEK_{w.upper()}": c[::-1] for w, c in CANARIES.items()},
    )  # fmt: skip


def run_jobs(
    fleet: Fleet, root: Path, jobs: dict[str, tuple[tuple[str, ...], ArtifactDest]]
) -> Run:
    """Each job (name -> its secrets and destination) submitted through the worker's gate, to
    its terminal state."""
    ids = {}
    for name, (asked, dest) in jobs.items():
        ids[name] = enqueue(canary_spec(root, name, asked, dest), fleet.ledger).job_id
    ends = {name: fleet.wait_terminal(job_id, timeout_s=100) for name, job_id in ids.items()}
    return ids, ends, {name: "\n".join(fleet.output(job_id)) for name, job_id in ids.items()}


def found_one(fleet: Fleet, job_id: str, out: str, kind: str) -> None:
    """The job asked for its token: it found exactly that one, as a file of its own (never in
    its environment), and ended FAILED (exit 3) for it."""
    assert fleet.ledger.get(job_id).state is JobState.FAILED, out
    assert fleet.ledger.get(job_id).get("exit_code") == "3"
    assert {line.split()[2] for line in out.splitlines() if "canary hit:" in line} == {kind}, out
    assert f"canary hit: {kind} token in environment" not in out
    assert "/.colabq/hf-token" in out


def no_canary_logged(fleet: Fleet, ids: dict[str, str]) -> None:
    logs = "\n".join(ln.text for j in ids.values() for ln in fleet.ledger.read_log(j))
    assert not [w for w, c in CANARIES.items() if c in logs]


def test_the_job_finds_no_token_unless_it_asks_and_then_only_its_users(
    fleet: Fleet, tmp_path: Path
) -> None:
    local = ArtifactDest(kind="local", repo=str(fleet.root / "store"))
    with ProcScanner(CANARIES["user"]) as scan:
        ids, ends, out = run_jobs(
            fleet, tmp_path, {"blind": ((), local), "asks": (("hf_token",), local)}
        )
    assert ends["blind"] is JobState.SUCCEEDED, out["blind"]
    assert "canary: 0 hits" in out["blind"] and "bundle: gone" in out["blind"]
    read = out["blind"].split("canary: read ")[1].split()
    assert int(read[0]) > 5 and int(read[3]) > 5 and read[-1] not in ("0", "root"), read
    # The user's token was the uploader's, in the uploader's environment alone.
    assert scan.hits and all("colabq_sync.py" in c for c in scan.hits.values()), scan.hits
    # Asked for by name: its user's own token, never the deployment's, another user's, a
    # destination's or the git credential.
    found_one(fleet, ids["asks"], out["asks"], "user")
    logs = "\n".join(ln.text for ln in fleet.ledger.read_log(ids["blind"]))
    assert "uploads use the user's Hub token" in logs
    no_canary_logged(fleet, ids)


def test_a_hub_job_gets_its_destinations_token_and_never_another_users(
    fleet: Fleet, hub: Hub, tmp_path: Path
) -> None:
    ids, _, out = run_jobs(
        fleet, tmp_path, {"hub": (("hf_token",), ArtifactDest(kind="hf", repo=SHARED))}
    )
    found_one(fleet, ids["hub"], out["hub"], "dest")
    assert "hub/out/r.txt" in hub.api().list_repo_files(SHARED)
    # Another user's repo: refused by the gate, in one line, before anything was recorded
    # (the worker checks again before allocation: tests/unit/test_runner_before_allocation.py).
    steals = canary_spec(tmp_path, "steals", ("hf_token",), ArtifactDest(kind="hf", repo=OTHERS))
    with pytest.raises(UserInputError) as refused:
        enqueue(steals, fleet.ledger)
    assert f"hf:{OTHERS} is not {USER}'s to use" in str(refused.value), refused.value
    assert "\n" not in str(refused.value)
    assert fleet.ledger.r.zcard(fleet.ledger.keys.jobs()) == 1  # the hub job alone
    no_canary_logged(fleet, ids)
