"""No file is ever written outside the state dir, whatever names are planted where they enter:
job ids and session names with `/..`, absolute paths, NUL, very long names, in a Celery task's
arguments (adopt, run_job), in records, in the indexes a janitor pass reads (active, leases,
endpoints, tracker-check, deferred), and in a host's own job folders; then the worker's and the
janitor's paths run for real (the janitor wired as on a beat host, with the emulated `colab`),
on the real Redis. The whole tree around the state dir is compared before and after."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import redis

from ops.chaos.env import EMU_ADMIN, EMULATOR
from tests.factories import make_spec
from worker.deps import build_ledger
from worker.errors import UntrustedValue
from worker.fleet.prober import Prober
from worker.janitor.run import janitor_pass
from worker.janitor.wiring import build_janitor_deps
from worker.records.ledger import Ledger
from worker.records.vms import NotTheJobsVm, check_vm
from worker.session.jobfiles import JobFiles
from worker.session.owner import adopt_job, find_orphaned
from worker.settings import Settings, load_settings
from worker.spec import encode_spec
from worker.states import JobState as S
from worker.tasks import adopt_task, execute_job

pytestmark = pytest.mark.integration

HEX16 = "0123456789abcdef"


def planted(root: Path) -> list[str]:
    """Names that would each land outside the state dir if they became a path."""
    return [
        f"{HEX16}/../../../outside/a",
        "../../outside/b",
        "../../../outside/c",
        str(root / "abs" / "d"),
        f"{HEX16}\x00",
        "a\x00/../../outside/e",
        "n" * 5000,
        f"{HEX16}/..",
        "..",
        ".",
    ]


def tree(root: Path, skip: set[Path]) -> dict[str, tuple[bool, int]]:
    """Every path under `root` but those in `skip` (and below): (is a folder, size)."""
    out = {}
    for path in root.rglob("*"):
        if any(path == s or s in path.parents for s in skip):
            continue
        out[str(path.relative_to(root))] = (
            path.is_dir(),
            path.stat().st_size if path.is_file() else 0,
        )
    return out


class FakeApp:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def send_task(self, name: str, args: list[str], **_: Any) -> None:
        self.sent.append(json.loads(args[0])["job_id"])


@pytest.fixture
def setup(redis_url: str, key_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    for name in ("outside", "abs", "cwd", "home", "emulator"):
        (tmp_path / name).mkdir()
    (tmp_path / "outside" / "kept").write_text("untouched")
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLAB_EMU_HOME", str(tmp_path / "emulator"))
    settings = load_settings(
        redis_url=redis_url, key_prefix=key_prefix, state_dir=tmp_path / "state",
        colab_bin=str(EMULATOR), queue_prefix=f"{key_prefix}.", janitor_reconcile_keys=100_000,
        orphan_grace_s=0,
    )  # fmt: skip
    settings.ensure_state_dir()
    ledger = build_ledger(settings)
    yield SimpleNamespace(settings=settings, ledger=ledger, root=tmp_path)
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(f"{key_prefix}*"):
        client.delete(key)
    subprocess.run([str(EMU_ADMIN), "kill-all"], capture_output=True, timeout=60, check=False)


def plant_everywhere(ledger: Ledger, settings: Settings, names: list[str], orphan: str) -> None:
    """Each name where the ledger's readers take ids and names from (an unrestricted client):
    records under those names carry a valid spec (another job's), so that only the names
    themselves stand between them and a path."""
    r, k = ledger.r, ledger.keys
    spec = encode_spec(make_spec())
    for i, name in enumerate(names):
        raw = name.encode()
        r.sadd(k.active(), raw)
        r.zadd(k.leases(), {raw: 1.0})
        r.zadd(k.tracker_check(), {raw: 1.0})
        r.zadd(k.deferred(), {raw: 1.0})
        r.zadd(k.jobs(), {raw: 1.0})
        r.hset(k.job(name), mapping={
            "spec": spec, "state": "failed" if i == 2 else "running", "owner": "",
            "session": "colabq-" + "0" * 32, "endpoint": orphan, "created_at": "1",
        })  # fmt: skip
    # The account's listed assignment names a path: its "job" is over, so a pass would stop it.
    r.hset(k.endpoints(), orphan, names[2])
    # A real job that ended, whose record's session and endpoint are paths.
    job_id, _ = ledger.create(make_spec())
    assert ledger.claim(job_id, "w1", ttl_s=30)
    ledger.transition(job_id, S.FAILED, owner="w1", reason="x")
    r.hset(k.job(job_id), mapping={"session": names[1], "endpoint": names[2]})
    r.zadd(k.tracker_check(), {job_id: 1.0})
    r.hset(k.job(job_id), "tracker_run", f"mlflow:{names[0]}")
    # This host's own job folders: one that is no job's.
    (settings.state_dir / "jobs" / "not-a-job").mkdir(parents=True)
    (settings.state_dir / "jobs" / "not-a-job" / "runner.json").write_text("{}")


def test_nothing_is_written_outside_the_state_dir_whatever_names_are_planted(setup: Any) -> None:
    settings, ledger, root = setup.settings, setup.ledger, setup.root
    names = planted(root)
    orphan = subprocess.run(
        [str(EMU_ADMIN), "orphan", "--gpu", "T4"], capture_output=True, text=True, timeout=60
    ).stdout.strip()
    assert orphan.startswith("gpu-"), orphan
    plant_everywhere(ledger, settings, names, orphan)
    skip = {settings.state_dir, root / "emulator", root / "home"}  # ours, and the far side's
    before = tree(root, skip)

    task = SimpleNamespace(request=SimpleNamespace(hostname="w@h"), app=None)
    for name in names:
        # A task message anyone may push: the adopt task's argument, the run_job's spec.
        assert adopt_task(task, name)["state"] == "refused"
        payload = encode_spec(make_spec(job_id=HEX16)).replace(f'"{HEX16}"', json.dumps(name))
        assert execute_job(payload, settings, ledger, "w@h")["state"] == "refused"
        # The functions below them, called as a buggy caller would.
        with pytest.raises(UntrustedValue):
            adopt_job(name, settings, ledger, worker_name="w@h")
        files = JobFiles(settings.state_dir / "jobs" / HEX16)
        assert files.endpoint(name) is None
        with pytest.raises(ValueError):
            files.record_endpoint(name, "gpu-1")
        with pytest.raises(NotTheJobsVm):
            check_vm(ledger, HEX16, name, orphan, settings.session_prefix)
    assert find_orphaned(settings) == []

    # The janitor, wired as on a beat host (the emulated account lists the planted orphan).
    app = FakeApp()
    deps = build_janitor_deps(settings, ledger, send_with=lambda: app)  # type: ignore[arg-type,return-value]
    for _ in range(2):
        report = janitor_pass(deps, dry_run=False)
        assert report.ran and report.account_measured, report.lines()
        assert not [row for row in report.rows if row.did.startswith(("did: adopt", "did: stop"))]
    # The fleet's prober sends due jobs from the deferred set.
    prober = Prober(app, settings, ledger, "w@h", (), lambda s: None)  # type: ignore[arg-type]
    assert prober.send_due(ledger.clock.time()) == [] and app.sent == []

    assert tree(root, skip) == before
    assert (root / "outside" / "kept").read_text() == "untouched"
    assert not (root / "state" / "outside").exists()
