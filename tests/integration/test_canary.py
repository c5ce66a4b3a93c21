"""A canary token planted in the worker's token file is found nowhere it must not be: no process's
command line or environment but the uploader's, no log, no Redis key, no Celery message, no file
but the job's own private copy on the VM (invariant 5)."""

from __future__ import annotations

import json
import os
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from producer.cli import app
from tests.integration.conftest import Fleet
from worker.states import JobState

pytestmark = pytest.mark.integration
CANARY = "hf_canary_" + secrets.token_hex(12)


@pytest.fixture
def fleet_env_extra(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    secret_dir = tmp_path_factory.mktemp("secret")
    token = secret_dir / "hf_token"
    token.write_text(CANARY + "\n")
    token.chmod(0o600)
    return {"COLABQ_HF_TOKEN_FILE": str(token)}


class ProcScanner:
    """Samples every process's command line and environment while the job runs."""

    def __init__(self) -> None:
        self.hits: dict[int, str] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        needle = CANARY.encode()
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
    assert "job env has token value: no" in logs and "job has a token file" in logs
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
    # Only the job's own private copy on the VM, mode 0600, outside the synced work folder.
    assert all(".colabq-secrets" in str(p) for p in found), found
    for p in found:
        assert oct(os.stat(p).st_mode & 0o777) == oct(0o600)
    assert not any(
        p.name == ".colabq-upload-token" for p in fleet.root.rglob(".colabq-upload-token")
    )
