"""A `code: git` job whose remote is an ssh remote (`git@git.test:org/project.git`), through a real
worker on the emulator, with the worker host's deploy key (COLABQ_GIT_SSH_KEY_FILE, a canary) and
no https credential: the worker's pre-allocation fetch and the VM's fetch both use the key alone
(a fake `ssh` on PATH stands for the forge's sshd: it serves the bare repository only to that key
and records each call), the VM's copy is a 0600 file in the wrapper's root-only folder, gone
after the fetch, and the key's text is in no process's argv or environment, no log, no Redis
value, no Flower page and no file but the host's own. The worker's card says it has a key, and
nothing of it."""

from __future__ import annotations

import json
import os
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from producer.submit import enqueue
from tests.factories import make_spec
from tests.gitremote import FakeSsh, canary_key, fake_ssh, make_remote
from tests.integration import test_flower
from tests.integration.conftest import Fleet
from tests.integration.test_canary import ProcScanner, redis_values
from worker.records.fleet import live_workers
from worker.spec import ArtifactDest, CodeSpec
from worker.states import JobState

pytestmark = pytest.mark.integration
flower = test_flower.flower
REMOTE = "git@git.test:org/project.git"


@dataclass(frozen=True)
class Forge:
    commit: str
    key: Path
    needle: str  # the key's text, to look for
    ssh: FakeSsh


@pytest.fixture
def forge(tmp_path_factory: pytest.TempPathFactory) -> Forge:
    root = tmp_path_factory.mktemp("forge")
    remote = make_remote(root / "org")
    key = tmp_path_factory.mktemp("secret") / "deploy-key"
    needle = canary_key(key, f"deploy-key-canary-{secrets.token_hex(8)}")
    return Forge(remote.pushed, key, needle, fake_ssh(root / "sshd", root, "git.test", key))


@pytest.fixture
def fleet_env_extra(forge: Forge) -> dict[str, str]:
    path = f"{forge.ssh.bin_dir}:{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"
    return {"COLABQ_GIT_SSH_KEY_FILE": str(forge.key), "PATH": path}


def test_an_ssh_remote_is_fetched_with_the_deploy_key_alone_and_the_key_is_nowhere_else(
    fleet: Fleet, forge: Forge, flower: str, redis_client: redis.Redis
) -> None:
    [card] = live_workers(fleet.ledger.r, fleet.ledger.keys)
    assert card.git_ssh_key is True and card.git_hosts == ()
    code = CodeSpec(mode="git", commit=forge.commit, remote=REMOTE)
    spec = make_spec(
        code=code, commit=code.commit, run_name="ssh-remote-deploy-key",
        artifact=ArtifactDest(kind="local", repo=str(fleet.root / "store"), prefix="ssh"),
        script='echo "head: $(git rev-parse HEAD)"\n',
    )  # fmt: skip
    with ProcScanner(forge.needle) as scan:
        job_id = enqueue(spec, fleet.ledger).job_id
        assert fleet.wait_terminal(job_id) is JobState.SUCCEEDED, fleet.ledger.get(job_id).reason
    assert f"head: {forge.commit}" in fleet.output(job_id)

    # Two fetches, each with the key alone: the worker's check (the host's own file), the VM's.
    checked, fetched = forge.ssh.calls()
    for call in (checked, fetched):
        assert call["host"] == "git.test" and call["command"] == "git-upload-pack 'org/project.git'"
        assert {"IdentitiesOnly=yes", "BatchMode=yes", "StrictHostKeyChecking=accept-new"} <= set(
            call["options"]  # type: ignore[arg-type]
        )
        assert call["known_hosts"] == ["bitbucket.org", "github.com", "gitlab.com"]
    assert checked["key"]["path"] == str(forge.key)  # type: ignore[index]
    vm_key = fetched["key"]
    assert isinstance(vm_key, dict)
    assert vm_key["path"].endswith(f"/content/.colabq-secrets/{job_id}/git-ssh-key")
    assert (vm_key["mode"], vm_key["dir_mode"]) == (0o600, 0o700)
    assert vm_key["uid"] == vm_key["dir_uid"] == fetched["uid"] == os.geteuid()  # git's user
    assert not Path(vm_key["path"]).exists()  # deleted after the fetch
    logs = "\n".join(ln.text for ln in fleet.ledger.read_log(job_id))
    assert "over ssh with this host's deploy key" in logs

    # Nowhere else: no argv or environment, no log, no Redis value, no Flower page, no file.
    assert scan.samples > 5 and scan.hits == {}
    assert forge.needle not in logs
    assert [v for v in redis_values(redis_client) if forge.needle.encode() in v] == []
    pages = ["/api/tasks", f"/api/task/info/{job_id}", f"/task/{job_id}", "/tasks", "/workers"]
    bodies = {page: test_flower.fetch(f"{flower}{page}") for page in pages}
    assert job_id in bodies["/api/tasks"]  # Flower saw the job: the look can fail
    assert [p for p, body in bodies.items() if forge.needle in body] == []
    files = [p for p in fleet.root.rglob("*") if p.is_file() and not p.is_symlink()]
    assert [p for p in files if forge.needle.encode() in p.read_bytes()] == []
    assert (
        list(fleet.root.rglob("git-ssh-key")) + list(fleet.root.rglob(".colabq-git-ssh-key")) == []
    )
    assert forge.needle in forge.key.read_text()  # the host's own, untouched
    assert forge.needle not in json.dumps(forge.ssh.calls())
