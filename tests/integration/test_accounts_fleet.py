"""Two Colab accounts on one Redis (two emulator homes, one a Colab account each): a job runs on
host B (account B, `--max-restarts 1`) and host B is lost mid-run. Only account A's janitor runs
(worker A's duty, and `colabq janitor --act` on A's login): it never adopts the job, says whose
it is, and account A is never assigned a VM for it. Then a host of account B comes up: its
janitor duty adopts the job, which SUCCEEDS on B's VM, released after the job ended."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ops.chaos.env import EMU_ADMIN, kill_processes_mentioning
from producer.cli import app
from tests.integration.conftest import Fleet, start_worker, stop_worker
from tests.integration.test_run_on_vm import numbered, submit, wait_for
from worker.states import JobState

pytestmark = pytest.mark.integration

A = "emulator@colab.example"  # the fleet's own emulator home: its default account
B = "b@colab.example"
runner = CliRunner()


@pytest.fixture
def fleet_env_extra() -> dict[str, str]:
    # Every worker host runs its account's janitor duty where no pass of the account ran for
    # 1.5 intervals: with a 1 s interval, about every 1.5 s.
    return {"COLABQ_JANITOR_INTERVAL_S": "1", "COLABQ_ACCOUNT": A}


@dataclasses.dataclass
class AccountB:
    fleet: Fleet
    home: str
    procs: list[subprocess.Popen[bytes]] = dataclasses.field(default_factory=list)

    def host(self, name: str, **extra: str) -> dict[str, str]:
        """Another machine logged in as account B (its own HOME and state dir); the
        deployment's settings otherwise (one queue prefix: the gate sends every job)."""
        env = {**self.fleet.other_host(name), "COLAB_EMU_HOME": self.home}
        env.pop("COLABQ_ACCOUNT")  # account A's setting
        return {**env, **extra}

    def start(self, env: dict[str, str], name: str) -> subprocess.Popen[bytes]:
        """A worker of B serving L4 (A's serves T4: a job asking for L4 runs on B)."""
        proc = start_worker(env, self.fleet.root / f"worker-{name}.log", gpu="l4")
        self.procs.append(proc)
        return proc


@pytest.fixture
def account_b(fleet: Fleet) -> Iterator[AccountB]:
    home = str(fleet.root / "emulator-b")
    made = subprocess.run([str(EMU_ADMIN), "--home", home, "set-account", B],
                          env=fleet.env, capture_output=True, text=True, timeout=30)  # fmt: skip
    assert made.returncode == 0, made.stderr
    b = AccountB(fleet, home)
    try:
        yield b
    finally:
        for proc in b.procs:
            stop_worker(proc)
        subprocess.run([str(EMU_ADMIN), "--home", home, "kill-all"], env=fleet.env,
                       capture_output=True, timeout=60)  # fmt: skip


def janitor_of_a(fleet: Fleet) -> dict[str, object]:
    res = subprocess.run(
        [sys.executable, "-m", "producer.cli", "janitor", "--act", "--json"],
        env=fleet.env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    return dict(json.loads(res.stdout))


def cli_json(env: dict[str, str], *args: str) -> object:
    result = runner.invoke(app, [*args, "--json"], env=env)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_only_a_host_of_the_jobs_account_acts_on_its_vm(fleet: Fleet, account_b: AccountB) -> None:
    # The job waits for a file `go` in its folder on the VM, which the test writes there.
    wait = 'echo "cwd=$(pwd)"\nwhile [ ! -e go ]; do sleep 0.1; done\necho done\n'
    script = numbered(5, pause_s=0.1, then=wait)
    # Host B runs no janitor pass of its own here (a 60 s interval): one it ran when it was
    # lost would hold account B's lock for its TTL (5 min), as a lost beat host's does.
    host_b = account_b.host("hostb", COLABQ_ACCOUNT=B, COLABQ_JANITOR_INTERVAL_S="60")
    proc_b = account_b.start(host_b, "b")
    on_b = dataclasses.replace(fleet, env=host_b, proc=proc_b)
    job_id = submit(on_b, script, "--max-restarts", "1", "--gpu", "L4")
    try:
        wait_for(lambda: any(ln.startswith("cwd=") for ln in fleet.output(job_id)),
                 "the job waiting for its go")  # fmt: skip
        assert fleet.ledger.get(job_id).get("account") == B
        # Host B is lost: its worker, its watchdog and its exec client.
        os.killpg(proc_b.pid, signal.SIGKILL)
        proc_b.wait()
        kill_processes_mentioning(host_b["COLABQ_STATE_DIR"])

        # Only account A's janitor runs: once the job's owner and watchdog are gone, a janitor
        # of B would adopt it; A's says whose it is and leaves it.
        deadline = time.monotonic() + 60
        while True:
            report = janitor_of_a(fleet)
            assert report["account"] == A, report
            rows = [r for r in report["rows"] if r["subject"] == job_id]  # type: ignore[index]
            assert not any(r["did"].startswith(("did", "would")) for r in rows), rows
            if any(r["why"].startswith("owner and watchdog gone") and
                   "left for a janitor of b@colab.example" in r["why"] for r in rows):  # fmt: skip
                break
            assert time.monotonic() < deadline, f"never seen as B's: {rows}"
        passes = fleet.ledger.r.hget(fleet.ledger.keys.janitor_passes(), A)
        wait_for(lambda: fleet.ledger.r.hget(fleet.ledger.keys.janitor_passes(), A) != passes,
                 "another pass of worker A's janitor duty")  # fmt: skip
        assert fleet.billing() == []  # account A was never assigned a VM for B's job
        rec = fleet.ledger.get(job_id)
        assert rec.state is JobState.RUNNING and rec.get("restarts") == "0", rec.fields

        # A host of account B comes up (no COLABQ_ACCOUNT: its login says which): its janitor
        # duty adopts the job, on B's VM.
        host_b2 = account_b.host("hostb2")
        account_b.start(host_b2, "b2")
        wait_for(lambda: fleet.ledger.r.exists(fleet.ledger.keys.lock(job_id)),
                 "the job adopted by a host of B", timeout_s=60)  # fmt: skip
        [cwd] = [ln.removeprefix("cwd=") for ln in fleet.output(job_id) if ln.startswith("cwd=")]
        (Path(cwd) / "go").write_text("go")
        assert fleet.wait_terminal(job_id, timeout_s=120) is JobState.SUCCEEDED
        assert "done" in fleet.output(job_id)
        rec = fleet.ledger.get(job_id)
        assert rec.get("account") == B and rec.get("restarts") == "0"
        assert json.loads(rec.get("report") or "{}")["account"] == B
        [vm] = dataclasses.replace(fleet, env=host_b2).billing()
        assert vm["unassigned_at"] is not None  # B's VM released once the job ended
        assert fleet.billing() == []

        status = cli_json(fleet.env, "status", job_id)
        assert status["account"] == B  # type: ignore[index]
        workers = {w["account"] for w in cli_json(fleet.env, "workers")}  # type: ignore[union-attr]
        assert workers == {A, B}
        usage = {a["account"]: a for a in cli_json(fleet.env, "usage")["accounts"]}  # type: ignore[index]
        assert usage[B]["jobs"] == 1 and usage[B]["units"] > 0 and A in usage
    finally:
        kill_processes_mentioning(f"adopt {job_id}")
