"""One scenario group's deployment: the integration tests' `Fleet` (a real Celery worker on the
emulator, its own key prefix, queues and folders) plus what the chaos suite needs around it:
more workers, the user's own assignments present throughout, a beat host running janitor passes,
and a plan of every job submitted with what it must end as.

The fleet code is the tests' (`tests/integration/conftest.py`), imported, so the suite and the
tests start, kill and inspect workers the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import redis
from typer.testing import CliRunner

from ops.chaos.env import ROOT, drop_job_share, fleet_env, job_share, kill_processes_mentioning
from producer.cli import app
from tests.integration.conftest import Fleet, start_worker, stop_worker
from worker.deps import build_ledger
from worker.settings import load_settings
from worker.states import TERMINAL, JobState

WAIVE = ("--waive", "config-diff", "--waive", "paths", "--waive", "monitoring")
BOUND_WORKER_S = 30.0  # GPU held after the job's end when its worker is SIGKILLed (P2)
BOUND_HOST_S = 60.0  # ... when its whole host is lost (P2, host loss)
_runner = CliRunner()
_submit_lock = threading.Lock()  # CliRunner swaps os.environ: one submit at a time


@dataclass
class JobPlan:
    """A submitted job and what the scenario expects of it."""

    job_id: str
    scenario: str
    run_name: str
    expect: frozenset[JobState]
    bound_s: float
    ended_file: Path  # the job script writes its own end time here (epoch s)
    artifacts: tuple[str, ...]  # paths under the run's prefix the store must hold afterwards
    deadline_s: float  # from submission: terminal by then, or the job is stuck
    submitted_at: float = field(default_factory=time.monotonic)
    lines: int = 0  # line-1 .. line-N must each be in its log stream exactly once (0: unchecked)
    assignments: int | None = None  # its assignments, when not one per segment


def job_script(ended: Path, body: str, *, ckpt: bool = True) -> str:
    """The job: its body, a checkpoint, then its own end time (the clock the GPU-held bound is
    measured from, as `tests/integration/test_janitor_fleet.py` does)."""
    save = "mkdir -p ckpt && echo weights > ckpt/m.pt\n" if ckpt else ""
    stamp = f"python3 -c 'import time; print(time.time())' > {ended}\n"
    return f"echo started\n{body}\n{save}{stamp}"


def numbered(n: int, pause_s: float = 0.1) -> str:
    return f'for i in $(seq 1 {n}); do echo "line-$i"; sleep {pause_s}; done'


@dataclass
class Group:
    """A scenario group: one deployment, its jobs, and the assignments that are not colabq's."""

    name: str
    fleet: Fleet
    extra_workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    foreign: dict[str, str] = field(default_factory=dict)  # endpoint -> whose
    jobs: list[JobPlan] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unmet: list[str] = field(default_factory=list)  # a scenario's own checks that failed
    janitor_passes: int = 0
    _seq: int = 0

    @property
    def root(self) -> Path:
        return self.fleet.root

    @property
    def env(self) -> dict[str, str]:
        return self.fleet.env

    @property
    def store(self) -> Path:
        """The local store, where the job's user can break its own run (`matrix.breaker`)."""
        store = job_share(self.root) / "store"
        if not store.is_dir():
            store.mkdir()
            store.chmod(0o777)
        return store

    # --- the user's own assignments ---------------------------------------------------------

    def add_foreign(self) -> None:
        """The user's notebook (`colab new` with a --config of their own) and an assignment no
        record names (`[?]`): both must still be assigned at the end."""
        notebook = self.root / "my-notebooks.json"
        made = self.fleet.run_colab("--config", str(notebook), "new", "-s", "my-notebook",
                                    "--gpu", "T4")  # fmt: skip
        if made.returncode != 0:
            raise RuntimeError(f"the user's notebook: {made.stdout}{made.stderr}")
        self.foreign[json.loads(notebook.read_text())["my-notebook"]["endpoint"]] = "notebook"
        unknown = self.fleet.emu("orphan", "--gpu", "T4").stdout.strip()
        if not unknown.startswith("gpu-"):
            raise RuntimeError(f"colab-emu orphan said {unknown!r}")
        self.foreign[unknown] = "[?]"

    # --- jobs -------------------------------------------------------------------------------

    def submit(
        self,
        scenario: str,
        body: str,
        *extra: str,
        expect: frozenset[JobState] = frozenset({JobState.SUCCEEDED}),
        bound_s: float = BOUND_WORKER_S,
        deadline_s: float = 120.0,
        idle: str = "5s",
        ckpt: bool = True,
        dest: tuple[str, ...] | None = None,
        lines: int = 0,
        assignments: int | None = None,
    ) -> JobPlan:
        self._seq += 1
        run = f"chaos-{self.name}-{self._seq}"
        ended = job_share(self.root) / f"ended-{run}"  # the job's user writes it
        path = self.root / "scripts" / f"{run}.sh"
        path.parent.mkdir(exist_ok=True)
        path.write_text(job_script(ended, body, ckpt=ckpt))
        sync = ("--sync", "ckpt", "--expect", "ckpt") if ckpt else ()
        where = dest if dest is not None else ("--local-store", str(self.store))
        argv = ["submit", str(path), "--name", run, "--wall", "10m", "--idle", idle, "--json",
                *where, *WAIVE, *sync, *extra]  # fmt: skip
        with _submit_lock:
            res = _runner.invoke(app, argv, env=self.env)
        if res.exit_code != 0:
            raise RuntimeError(f"submit {run}: {res.output}")
        plan = JobPlan(
            str(json.loads(res.output)["jobs"][0]["job_id"]), scenario, run, expect, bound_s, ended,
            ("ckpt/m.pt",) if ckpt else (), deadline_s, lines=lines, assignments=assignments,
        )  # fmt: skip
        self.jobs.append(plan)
        return plan

    def check(self, ok: object, what: str) -> bool:
        """A scenario's own expectation (a worker drained, a job on its fallback GPU): one that
        fails counts in the table's "unmet checks"."""
        if not ok:
            self.unmet.append(what)
        return bool(ok)

    def cli(self, *argv: str, env: dict[str, str] | None = None) -> object:
        """`colabq ARGV --json` in this deployment, its parsed output (raises on failure)."""
        with _submit_lock:
            res = _runner.invoke(app, [*argv, "--json"], env=env or self.env)
        if res.exit_code != 0:
            why = res.output or f"{type(res.exception).__name__}: {res.exception}"
            raise RuntimeError(f"colabq {' '.join(argv)}: {why}")
        return json.loads(res.output)

    def state(self, job_id: str) -> JobState | None:
        try:
            return self.fleet.ledger.get(job_id).state
        except Exception:  # a record lost with Redis's data, or Redis down
            return None

    def wait_terminal(self, jobs: list[JobPlan], extra_s: float = 0.0) -> None:
        """Until every job is terminal or past its deadline (the counters judge which)."""
        while True:
            left = [
                j for j in jobs
                if self.state(j.job_id) not in TERMINAL
                and time.monotonic() - j.submitted_at < j.deadline_s + extra_s
            ]  # fmt: skip
            if not left:
                return
            time.sleep(0.3)

    # --- workers ----------------------------------------------------------------------------

    def add_workers(self, n: int) -> None:
        for i in range(n):
            self.extra_workers.append(start_worker(self.env, self.root / f"worker-{i + 2}.log"))

    def add_worker(
        self, env: dict[str, str], name: str, queues: tuple[str, ...] = ("gpu.t4",)
    ) -> subprocess.Popen[bytes]:
        """One more worker with its own environment (another host, other GPU types), serving
        `queues` (without the deployment's queue prefix); stopped with the group."""
        proc = start_worker_on(env, self.root / f"worker-{name}.log", queues)
        self.extra_workers.append(proc)
        return proc

    def kill_worker(self) -> None:
        """SIGKILL the worker (main and pool) and start another on the same host: a crash,
        then what a supervisor does."""
        self.fleet.kill_worker()
        self.fleet.restart_worker()

    def stop_workers(self) -> None:
        for proc in [self.fleet.proc, *self.extra_workers]:
            stop_worker(proc)

    # --- another host -----------------------------------------------------------------------

    def beat_env(self) -> dict[str, str]:
        """The janitor's host: its own state dir and home, the account's credentials, short
        graces so that a test-length scenario sees every rule act."""
        return {
            **self.fleet.other_host("beat"),
            "COLABQ_WATCHDOG_STALE_S": "2",
            "COLABQ_ORPHAN_GRACE_S": "4",
            "COLABQ_STRANDED_GRACE_S": "6",
        }

    def janitor_pass(self) -> dict[str, object] | None:
        res = subprocess.run(
            [sys.executable, "-m", "producer.cli", "janitor", "--act", "--json"],
            env=self.beat_env(), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        self.janitor_passes += 1
        if res.returncode != 0:
            self.notes.append(f"janitor pass failed: {(res.stdout + res.stderr)[-300:]}")
            return None
        return dict(json.loads(res.stdout))

    @contextlib.contextmanager
    def beat(self, every_s: float = 4.0) -> Iterator[None]:
        """Janitor passes every `every_s` from the beat host while the block runs, as beat
        would: the janitor recovers what died and must leave the user's assignments alone."""
        stop = threading.Event()

        def loop() -> None:
            while not stop.is_set():
                started = time.monotonic()
                with contextlib.suppress(Exception):
                    self.janitor_pass()
                stop.wait(max(0.0, every_s - (time.monotonic() - started)))

        t = threading.Thread(target=loop, name=f"beat-{self.name}", daemon=True)
        t.start()
        try:
            yield
        finally:
            stop.set()
            t.join(timeout=130)


def start_worker_on(
    env: dict[str, str], log: Path, queues: tuple[str, ...], ready_s: float = 60.0
) -> subprocess.Popen[bytes]:
    """A Celery worker serving `queues` (the tests' `start_worker` serves gpu.t4 only)."""
    prefix = env["COLABQ_QUEUE_PREFIX"]
    argv = [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker",
            "-Q", ",".join(f"{prefix}{q}" for q in queues), "-c", "1",
            "-n", f"chaos-{secrets.token_hex(3)}@%h", "-l", "INFO", "-E"]  # fmt: skip
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
    if not wait_until(lambda: b"ready." in log.read_bytes() or proc.poll() is not None, ready_s):
        stop_worker(proc)
        raise RuntimeError(f"worker on {queues} not ready in {ready_s:.0f} s")
    if proc.poll() is not None:
        raise RuntimeError(f"worker on {queues} died: {log.read_text()[-500:]}")
    return proc


def wait_until(cond: Callable[[], object], timeout_s: float, poll_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if cond():
                return True
        time.sleep(poll_s)
    return False


@contextlib.contextmanager
def open_group(
    name: str, root: Path, redis_url: str, extra_env: dict[str, str] | None = None
) -> Iterator[Group]:
    """A deployment under `root` with one worker and the user's own assignments; everything it
    started is ended afterwards, and its Redis keys deleted."""
    prefix = f"colabq-chaos-{secrets.token_hex(4)}"
    root.mkdir(parents=True, exist_ok=True)
    env = fleet_env(redis_url, root, prefix, {"PYTHONPATH": str(ROOT), **(extra_env or {})})
    proc = start_worker(env, root / "worker.log")
    ledger = build_ledger(load_settings(redis_url=redis_url, key_prefix=prefix))
    group = Group(name, Fleet(env, ledger, root, proc))
    try:
        group.add_foreign()
        yield group
    finally:
        group.stop_workers()
        group.fleet.emu("kill-all")
        kill_processes_mentioning(str(root))
        _kill_environ_mentioning(str(root))
        drop_job_share(root)
        with contextlib.suppress(redis.RedisError):
            client = redis.Redis.from_url(redis_url)
            for pattern in (f"{prefix}*", f"_kombu.binding.{prefix}*"):
                for key in client.scan_iter(pattern):
                    client.delete(key)


def _kill_environ_mentioning(text: str) -> None:
    """Processes whose environment names the folder (an adopter the janitor started)."""
    for pid in processes_mentioning(text):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def processes_mentioning(text: str, exclude_marks: tuple[str, ...] = ()) -> list[int]:
    """Live processes whose command line or environment names `text`, except those whose
    environment holds one of `exclude_marks` (the VMs of the user's own assignments)."""
    found = []
    needle = text.encode()
    marks = [m.encode() for m in exclude_marks]
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2 :].startswith(("Z", "X")):
            continue
        if needle not in cmdline and needle not in environ:
            continue
        if any(m in environ for m in marks):
            continue
        found.append(int(entry.name))
    return found
