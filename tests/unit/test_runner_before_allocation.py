"""Invariant 1: nothing is allocated before the spec, script, token, destination, resume input,
code, CLI version, budget and watchdog checks pass. The runner runs against an in-memory Colab twin
and fakeredis; each failing check must end the job without a single `colab new`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fakeredis
import pytest

from tests.factories import make_spec
from tests.gitremote import make_remote
from worker.clock import FakeClock
from worker.colab.driver import LocalRecord, ServerSession, SessionStatus, StopOutcome, Usage
from worker.errors import HubNotFound, HubRepoNotPrivate
from worker.records.fleet import WorkerCard, publish
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.session.jobfiles import JobFiles
from worker.session.runner import RunnerDeps, run_job
from worker.session.watchdog import WatchdogNotAlive
from worker.settings import Settings
from worker.spec import ArtifactDest, CodeSpec, JobSpec
from worker.states import JobState as S
from worker.store.artifacts import LocalStore


@dataclass
class FakeColab:
    """The part of the `colab` CLI the checks touch; records every call."""

    config_path: Path
    version_text: str = "0.7.4"
    balance: float = 100.0
    calls: list[str] = field(default_factory=list)

    def version(self) -> str:
        self.calls.append("version")
        return self.version_text

    def usage(self) -> Usage:
        self.calls.append("usage")
        return Usage(self.balance, 0.0, 0)

    def new(
        self, name: str, gpu: str, high_mem: bool, *, on_retry: Callable[[str], None] | None = None
    ) -> None:
        self.calls.append("new")
        raise AssertionError("colab new must not be called in these tests")

    def status(self, name: str) -> SessionStatus | None:
        self.calls.append("status")
        return None

    def sessions(self) -> list[ServerSession]:
        return []

    def upload(self, name: str, local: Path, remote: str) -> None:
        self.calls.append("upload")

    def download(
        self, name: str, remote: str, local: Path, *, timeout_s: float | None = None
    ) -> None:
        self.calls.append("download")

    def restart_kernel(self, name: str) -> None:
        self.calls.append("restart-kernel")

    def exec(self, name: str, file: Path, timeout_s: float) -> str:
        self.calls.append("exec")
        return ""

    def ls(self, name: str, path: str) -> list[str]:
        return []

    def stop(self, name: str) -> StopOutcome:
        self.calls.append("stop")
        return StopOutcome.NOT_FOUND

    def exec_argv(self, name: str, file: Path, timeout_s: float) -> list[str]:
        return ["true"]

    def exec_env(self) -> dict[str, str]:
        return {}

    def local_record(self, name: str) -> LocalRecord | None:
        return None


class RefusingStore(LocalStore):
    def check_destination(self, dest: Any) -> str:
        raise HubRepoNotPrivate("alice/runs", "model")


@dataclass
class Case:
    name: str
    expect: S
    spec: dict[str, Any] = field(default_factory=dict)
    colab: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    store: type[LocalStore] = LocalStore
    check_input: Callable[[str], int] = lambda uri: 1
    watchdog_fails: bool = False
    cancel: bool = False
    token_mode: int | None = None
    token_text: str = "hf_x"
    # The job's code, made in the test's folder, and this host's git credentials file's mode.
    code: Callable[[Path], CodeSpec] | None = None
    git_credentials_mode: int | None = None
    reason: str = ""  # a part of the job's reason
    # Other live workers' cards: (name, the hosts their git credentials cover, a deploy key).
    cards: tuple[tuple[str, tuple[str, ...], bool], ...] = ()
    # Files of this host's Hub token folder (COLABQ_HF_TOKEN_DIR): name -> text.
    tokens: dict[str, str] = field(default_factory=dict)


def _missing(uri: str) -> int:
    raise HubNotFound(uri)


def _unpushed(root: Path) -> CodeSpec:
    remote = make_remote(root)
    return CodeSpec(mode="git", commit=remote.unpushed, remote=str(remote.bare))


def _pushed(root: Path) -> CodeSpec:
    remote = make_remote(root)
    return CodeSpec(mode="git", commit=remote.pushed, remote=str(remote.bare))


def _ssh(root: Path) -> CodeSpec:
    return CodeSpec(mode="git", commit="c" * 40, remote="git@github.com:org/repo.git")


def _unreachable(root: Path) -> CodeSpec:
    return CodeSpec(mode="git", commit="a" * 40, remote="http://127.0.0.1:9/project.git")


CASES = [
    Case("script fails bash -n", S.FAILED, spec={"script": "if then fi (\n"}),
    # The host's own checks put the job back untouched (and drain the worker): not its fault.
    Case("colab is a release colabq does not drive", S.QUEUED, colab={"version_text": "0.8.0"}),
    Case(
        "balance below budget",
        S.FAILED_BUDGET,
        spec={"budget_units": 50.0},
        colab={"balance": 10.0},
    ),
    # A zero balance with the default budget (0) and floor (0): nothing is allocated.
    Case("balance zero, default budget", S.FAILED_BUDGET, colab={"balance": 0.0}),
    Case(
        "balance at the configured floor",
        S.FAILED_BUDGET,
        colab={"balance": 5.0},
        settings={"budget_floor_units": 5.0},
    ),
    # The floor of this worker's account (COLABQ_BUDGET_FLOORS) wins over the host's default.
    Case(
        "balance at its account's floor",
        S.FAILED_BUDGET,
        colab={"balance": 9.0},
        settings={"account": "a@x.org", "budget_floors": {"a@x.org": 10.0, "b@x.org": 1.0}},
    ),
    Case("token file mode 0644", S.QUEUED, token_mode=0o644),
    Case("token file empty", S.QUEUED, token_mode=0o600, token_text=""),
    Case("token file over 16 KiB", S.QUEUED, token_mode=0o600, token_text="x" * 17000),
    Case("output repo public", S.FAILED, store=RefusingStore),
    Case(
        "resume checkpoint missing",
        S.FAILED,
        spec={"resume_from": "hf://a/b/ckpt"},
        check_input=_missing,
    ),
    Case("code: commit not on its remote", S.FAILED, code=_unpushed, reason="push it, then"),
    Case("code: remote unreachable", S.QUEUED, code=_unreachable, reason="cannot reach"),
    Case(
        "code: snapshot missing",
        S.FAILED,
        code=lambda root: CodeSpec(
            mode="snapshot", commit="b" * 40, snapshot=(root / "gone.tar.gz").as_uri()
        ),
        reason="submit again to stage it",
    ),
    # An ssh remote this host has neither a github.com credential nor a deploy key for: another
    # live worker of the queue that can fetch it takes it; with none, it is the job's.
    Case(
        "code: ssh remote no worker can fetch",
        S.FAILED,
        code=_ssh,
        cards=(("w-gitlab", ("gitlab.com",), False),),
        reason="is an ssh remote and this worker host has no way to fetch it",
    ),
    Case(
        "code: ssh remote another worker can fetch",
        S.QUEUED,
        code=_ssh,
        cards=(("w-gitlab", ("gitlab.com",), False), ("w-key", (), True)),
        reason="COLABQ_GIT_SSH_KEY_FILE, or ship the code with code: snapshot (w-key can)",
    ),
    Case(
        "code: git credentials file mode 0644",
        S.QUEUED,
        code=_pushed,
        git_credentials_mode=0o644,
        reason="COLABQ_GIT_CREDENTIALS_FILE",
    ),
    # Tokens belong to owners: alice's job to bob's repo (its own token, for bob alone) ends
    # before allocation, whatever a gate let through; under ACLs a local store needs the root.
    Case(
        "destination another user's",
        S.FAILED,
        spec={
            "job_id": "0123456789abcdef.alice",
            "submitted_by": "alice",
            "artifact": ArtifactDest(kind="hf", repo="bob/model", prefix="r"),
        },
        tokens={"dest/bob__model": "hf_bob", "dest/bob__model.users": "bob\n"},
        reason="hf:bob/model is not alice's to use",
    ),
    Case(
        "local store outside the operator's root",
        S.FAILED,
        spec={"job_id": "0123456789abcdef.alice", "submitted_by": "alice"},
        reason="no folder is open to users until an operator sets COLABQ_LOCAL_STORE_ROOT",
    ),
    Case("watchdog not confirmed alive", S.QUEUED, watchdog_fails=True),
    Case("cancelled before allocation", S.CANCELLED, cancel=True),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_failed_check_allocates_nothing(case: Case, tmp_path: Path) -> None:
    ledger = Ledger(fakeredis.FakeRedis(), FakeClock(), Keys("t"), log_maxlen=1000)
    code = case.code(tmp_path) if case.code else None
    spec: JobSpec = make_spec(
        **case.spec, **({"code": code, "commit": code.commit} if code else {})
    )
    ledger.create(spec)
    assert ledger.claim(spec.job_id, "me", ttl_s=30)
    now = time.time()
    for name, hosts, key in case.cards:
        card = WorkerCard(name, "h", ("T4",), ("gpu.t4",), None, now, now, "", hosts, key)
        publish(ledger.r, ledger.keys, card, ttl_s=600)
    if case.cancel:
        ledger.request_cancel(spec.job_id, "changed my mind")
    token_file = None
    if case.token_mode is not None:
        token_file = tmp_path / "hf_token"
        token_file.write_text(case.token_text)
        token_file.chmod(case.token_mode)
    git_credentials = None
    if case.git_credentials_mode is not None:
        git_credentials = tmp_path / "git-credentials"
        git_credentials.write_text("https://u:t@github.com\n")
        git_credentials.chmod(case.git_credentials_mode)
    for name, text in case.tokens.items():
        path = tmp_path / "tokens" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o644 if name.endswith(".users") else 0o600)
    settings = Settings(
        state_dir=tmp_path / "state", hf_token_file=token_file,
        git_credentials_file=git_credentials,
        hf_token_dir=tmp_path / "tokens" if case.tokens else None, **case.settings,
    )  # fmt: skip
    files = JobFiles(tmp_path / "job").ensure()
    colab = FakeColab(files.cli_config, **case.colab)
    started: list[str] = []

    def start_watchdog(f: JobFiles, env: Any) -> None:
        if case.watchdog_fails:
            raise WatchdogNotAlive("did not confirm")
        started.append("watchdog")

    deps = RunnerDeps(
        clock=FakeClock(), ledger=ledger, driver=colab, store=case.store(), settings=settings,
        files=files, start_watchdog=start_watchdog, check_input=case.check_input,
    )  # fmt: skip
    outcome = run_job(spec, "me", deps)
    assert outcome.state is case.expect, outcome.reason
    assert "new" not in colab.calls
    rec = ledger.get(spec.job_id)
    assert rec.state is case.expect and rec.get("endpoint") is None
    assert rec.reason  # invariant 7: a reason `colabq status` shows
    if case.reason:
        assert case.reason in rec.reason and "\n" not in rec.reason, rec.reason
    if case.expect is S.QUEUED:
        # Given back untouched: no owner, no lock, the attempt on record with the host's cause.
        assert outcome.put_back == "host" and rec.owner == ""
        assert ledger.r.get(ledger.keys.lock(spec.job_id)) is None
        [attempt] = json.loads(rec.get("putbacks") or "[]")
        assert attempt["cause"] == "host" and attempt["worker"] == "worker"
        assert [h.state for h in ledger.history(spec.job_id)][-2:] == [S.ALLOCATING, S.QUEUED]
    else:
        assert outcome.put_back is None


def test_all_checks_pass_then_the_watchdog_starts_before_allocation(tmp_path: Path) -> None:
    ledger = Ledger(fakeredis.FakeRedis(), FakeClock(), Keys("t"), log_maxlen=1000)
    spec = make_spec()
    ledger.create(spec)
    ledger.claim(spec.job_id, "me", ttl_s=30)
    files = JobFiles(tmp_path / "job").ensure()
    colab = FakeColab(files.cli_config)
    order: list[str] = []

    def start_watchdog(f: JobFiles, env: Any) -> None:
        order.append("watchdog")
        assert f.read_watch() is not None  # it knows what to enforce before it starts

    original_new = colab.new

    def new(name: str, gpu: str, high_mem: bool, **kwargs: object) -> None:
        order.append("new")
        original_new(name, gpu, high_mem)

    colab.new = new  # type: ignore[method-assign]
    deps = RunnerDeps(
        clock=FakeClock(), ledger=ledger, driver=colab, store=LocalStore(),
        settings=Settings(state_dir=tmp_path / "s"), files=files, start_watchdog=start_watchdog,
        check_input=lambda uri: 1,
    )  # fmt: skip
    outcome = run_job(spec, "me", deps)
    # The fake's `new` raises: even an unexpected error ends the job, never a traceback.
    assert outcome.state is S.FAILED and "AssertionError" in outcome.reason
    assert order == ["watchdog", "new"]


@pytest.mark.parametrize("state", [S.RUNNING, S.RETAINED])
def test_a_cancel_never_releases_a_vm_that_holds_the_only_copy(state: S, tmp_path: Path) -> None:
    from worker.session.job import Finish
    from worker.session.runner import Runner

    ledger = Ledger(fakeredis.FakeRedis(), FakeClock(), Keys("t"), log_maxlen=1000)
    spec = make_spec()
    ledger.create(spec)
    ledger.claim(spec.job_id, "me", ttl_s=30)
    for step in (S.ALLOCATING, S.STARTING, S.RUNNING, S.RETAINED):
        ledger.transition(spec.job_id, step, owner="me", reason=step.value)
        if step is state:
            break
    ledger.request_cancel(spec.job_id, "changed my mind")
    files = JobFiles(tmp_path / "job").ensure()
    deps = RunnerDeps(
        clock=FakeClock(), ledger=ledger, driver=FakeColab(files.cli_config), store=LocalStore(),
        settings=Settings(state_dir=tmp_path / "s"), files=files,
        start_watchdog=lambda f, env: None, check_input=lambda uri: 1,
    )  # fmt: skip
    runner = Runner(spec, "me", deps)
    runner.deadline_at = 1e12
    if state is S.RETAINED:
        runner._guard(ledger.get(spec.job_id))  # the recovery goes first; the cancel waits
    else:
        with pytest.raises(Finish) as ended:
            runner._guard(ledger.get(spec.job_id))
        assert ended.value.state is S.CANCELLED
