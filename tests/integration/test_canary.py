"""A canary token planted in the worker's token file is found nowhere it must not be: no process's
command line or environment but the uploader's, no log, no Redis key, no Celery message, no file
but the host's own (invariant 5; a job that does not ask for it by name gets no copy: what the
job itself can find is tests/integration/test_job_secrets.py). The same for a canary git
credential the pre-allocation code check offers a remote that refuses it."""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from producer.cli import app
from producer.submit import enqueue
from tests.factories import make_spec
from tests.gitremote import GitHttpServer, git_http_server, make_remote
from tests.integration.conftest import Fleet
from worker.spec import ArtifactDest, CodeSpec
from worker.states import JobState

pytestmark = pytest.mark.integration
CANARY = "hf_canary_" + secrets.token_hex(12)
GIT_CANARY = "ghp_canary_" + secrets.token_hex(12)


@pytest.fixture
def git_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitHttpServer]:
    """A private git remote on this machine that refuses the worker's (canary) credential."""
    with git_http_server(tmp_path_factory.mktemp("git"), "colabq", "not-the-canary") as server:
        yield server


@pytest.fixture
def git_server_ok(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitHttpServer]:
    """A private git remote on this machine that takes the worker's (canary) credential."""
    with git_http_server(tmp_path_factory.mktemp("git-ok"), "colabq", GIT_CANARY) as server:
        yield server


@pytest.fixture
def fleet_env_extra(
    tmp_path_factory: pytest.TempPathFactory,
    git_server: GitHttpServer,
    git_server_ok: GitHttpServer,
) -> dict[str, str]:
    secret_dir = tmp_path_factory.mktemp("secret")
    token = secret_dir / "hf_token"
    token.write_text(CANARY + "\n")
    token.chmod(0o600)
    creds = secret_dir / "git-credentials"
    creds.write_text(
        f"http://colabq:{GIT_CANARY}@127.0.0.1:{git_server.port}\n"
        f"http://colabq:{GIT_CANARY}@127.0.0.1:{git_server_ok.port}\n"
    )
    creds.chmod(0o600)
    return {"COLABQ_HF_TOKEN_FILE": str(token), "COLABQ_GIT_CREDENTIALS_FILE": str(creds)}


class ProcScanner:
    """Samples every process's command line and environment while the job runs."""

    def __init__(self, needle: str = CANARY) -> None:
        self.needle = needle.encode()
        self.hits: dict[int, str] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        needle = self.needle
        while not self._stop.is_set():
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    cmdline = (entry / "cmdline").read_bytes()
                    environ = (entry / "environ").read_bytes()
                except OSError:
                    continue
                if needle in cmdline or needle in environ:
                    self.hits[int(entry.name)] = cmdline.replace(b"\0", b" ").decode(
                        errors="replace"
                    )
            self.samples += 1
            self._stop.wait(0.02)

    def __enter__(self) -> ProcScanner:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def redis_values(client: redis.Redis) -> Iterator[bytes]:
    for key in client.scan_iter(count=500):
        kind = client.type(key)
        yield key
        if kind == b"string":
            yield client.get(key) or b""
        elif kind == b"hash":
            yield from (v for kv in client.hgetall(key).items() for v in kv)
        elif kind == b"list":
            yield from client.lrange(key, 0, -1)
        elif kind == b"set":
            yield from client.smembers(key)
        elif kind == b"zset":
            yield from client.zrange(key, 0, -1)
        elif kind == b"stream":
            for _, fields in client.xrange(key):
                yield from (v for kv in fields.items() for v in kv)


def test_canary_token_is_found_nowhere_it_must_not_be(
    fleet: Fleet, redis_client: redis.Redis
) -> None:
    script = fleet.root / "job.sh"
    script.write_text(
        'echo "job env has token value: ${HF_TOKEN:-no}"\n'
        'test -n "$HF_TOKEN_PATH" && test -f "$HF_TOKEN_PATH" && echo "job has a token file"\n'
        "mkdir -p out && echo result > out/r.txt\nsleep 2\n"
    )
    with ProcScanner() as scan:
        result = CliRunner().invoke(
            app,
            ["submit", str(script), "--name", "mnist-mlp-bs64-lr1e-3-canary", "--wall", "10m",
             "--local-store", str(fleet.root / "store"), "--sync", "out", "--json",
             "--waive", "config-diff", "--waive", "paths", "--waive", "monitoring"],
            env=fleet.env,
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        job_id = json.loads(result.output)["jobs"][0]["job_id"]
        assert fleet.wait_terminal(job_id) is JobState.SUCCEEDED, fleet.ledger.get(job_id).reason
    assert scan.samples > 10
    # The uploader had it (proof the scan can see it), and nothing else did.
    assert any("colabq_sync.py" in c for c in scan.hits.values()), "the scan never saw the uploader"
    assert all("colabq_sync.py" in c for c in scan.hits.values()), scan.hits

    logs = "\n".join(ln.text for ln in fleet.ledger.read_log(job_id))
    assert "job env has token value: no" in logs and "job has a token file" not in logs
    assert CANARY not in logs

    leaked = [v for v in redis_values(redis_client) if CANARY.encode() in v]
    assert leaked == []

    token_file = Path(fleet.env["COLABQ_HF_TOKEN_FILE"])
    found = []
    for path in fleet.root.rglob("*"):
        if not path.is_file() or path.is_symlink() or path == token_file:
            continue
        if CANARY.encode() in path.read_bytes():
            found.append(path)
    assert found == []  # the job asked for no copy: the VM's only one was read and deleted
    assert not any(
        p.name == ".colabq-upload-token" for p in fleet.root.rglob(".colabq-upload-token")
    )


def test_code_not_fetchable_fails_before_allocation_and_the_git_credential_stays_put(
    fleet: Fleet, redis_client: redis.Redis, git_server: GitHttpServer
) -> None:
    """A commit not on its remote, and a private remote that refuses this host's credential:
    each job FAILED with one line saying what to do, nothing allocated, and the credential
    (offered to the remote: it was used) nowhere else."""
    remote = make_remote(git_server.root)
    store = ArtifactDest(kind="local", repo=str(fleet.root / "store"), prefix="runs")
    cases = {
        "not-pushed": CodeSpec(mode="git", commit=remote.unpushed, remote=remote.url),
        "refused": CodeSpec(
            mode="git", commit=remote.pushed, remote=git_server.url(remote.bare.name)
        ),
    }
    jobs: dict[str, str] = {}
    with ProcScanner(GIT_CANARY) as scan:
        for name, code in cases.items():
            spec = make_spec(
                code=code, commit=code.commit, artifact=store.model_copy(update={"prefix": name}),
                run_name=f"code-{name}",
            )  # fmt: skip
            jobs[name] = enqueue(spec, fleet.ledger).job_id
        for job_id in jobs.values():
            assert fleet.wait_terminal(job_id) is JobState.FAILED, fleet.ledger.get(job_id).reason
    assert fleet.billing() == []  # no `colab new`, for either
    not_pushed, refused = (fleet.ledger.get(jobs[n]).reason for n in ("not-pushed", "refused"))
    assert not_pushed == (
        f"pre-allocation check failed: commit {remote.unpushed[:12]} is not on {remote.url}: "
        f"push it, then `colabq retry {jobs['not-pushed']}`"
    )
    assert f"cannot read {git_server.url(remote.bare.name)} (Authentication failed" in refused
    assert "COLABQ_GIT_CREDENTIALS_FILE" in refused
    assert refused.endswith(f"then `colabq retry {jobs['refused']}`")
    assert f"colabq:{GIT_CANARY}" in git_server.offered  # the check used the host's credential

    assert scan.samples > 5 and scan.hits == {}  # no argv, no environment
    logs = "\n".join(ln.text for j in jobs.values() for ln in fleet.ledger.read_log(j))
    assert "destination:" in logs and GIT_CANARY not in logs
    assert [v for v in redis_values(redis_client) if GIT_CANARY.encode() in v] == []
    creds = Path(fleet.env["COLABQ_GIT_CREDENTIALS_FILE"])
    assert GIT_CANARY in creds.read_text()  # refused, yet never erased from the host's file
    files = [p for p in fleet.root.rglob("*") if p.is_file() and not p.is_symlink()]
    assert [p for p in files if GIT_CANARY.encode() in p.read_bytes()] == []


def test_the_git_credential_reaches_the_vm_as_a_file_and_is_gone_after_the_fetch(
    fleet: Fleet, redis_client: redis.Redis, git_server_ok: GitHttpServer
) -> None:
    """A code: git job from a private remote that takes only the host's credential: the VM
    fetched the commit (so it had the credential), yet no process's command line or
    environment, no log, no Redis value and no file but the host's own holds it: the VM's copy
    was a file git alone read, deleted once the fetch was over."""
    remote = make_remote(git_server_ok.root)
    code = CodeSpec(mode="git", commit=remote.pushed, remote=git_server_ok.url(remote.bare.name))
    spec = make_spec(
        code=code, commit=code.commit, run_name="code-private",
        artifact=ArtifactDest(kind="local", repo=str(fleet.root / "store"), prefix="private"),
        script='echo "head: $(git rev-parse HEAD)"\necho "in env: $(env | grep -c ghp_ || true)"\n',
    )  # fmt: skip
    with ProcScanner(GIT_CANARY) as scan:
        job_id = enqueue(spec, fleet.ledger).job_id
        assert fleet.wait_terminal(job_id) is JobState.SUCCEEDED, fleet.ledger.get(job_id).reason
    assert f"head: {remote.pushed}" in fleet.output(job_id) and "in env: 0" in fleet.output(job_id)
    assert scan.samples > 5 and scan.hits == {}  # no argv, no environment
    logs = "\n".join(ln.text for ln in fleet.ledger.read_log(job_id))
    assert "fetching" in logs and GIT_CANARY not in logs
    assert [v for v in redis_values(redis_client) if GIT_CANARY.encode() in v] == []
    creds = Path(fleet.env["COLABQ_GIT_CREDENTIALS_FILE"])
    files = [p for p in fleet.root.rglob("*") if p.is_file() and not p.is_symlink()]
    assert [p for p in files if GIT_CANARY.encode() in p.read_bytes()] == []
    assert GIT_CANARY in creds.read_text()  # the host's own, untouched
    vm_copies = list(fleet.root.rglob(".colabq-git-credentials")) + list(
        fleet.root.rglob("git-credentials")
    )
    assert vm_copies == []
