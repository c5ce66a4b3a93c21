"""The launch cell's `colab exec`: its LAUNCHED sentinel read as the client streams it, and, when
the client fails without one, the VM asked whether the job was launched.

The real client outlives its cell (spec, exec, "The client outlives its cell"): after the reply
it writes its record back and closes its websocket and threads, seconds on a loaded host, and it
may be killed in that window (the OOM killer, a restart) or see its VM preempted. What the cell
started runs on meanwhile. So:
- the job proceeds the moment the sentinel is read; the client finishes in the background,
  reaped by a thread, and is killed with its process group among the job's exec clients
  (`procs.kill_job_processes`: its `-f` names the job folder);
- a client that ended without the sentinel and not with exit 0 (killed, a transport error, a
  VM gone under it) is no verdict on the job: the VM decides. The session gone -> the VM was
  lost (VM_LOST, or a restart when the job allows one); the wrapper's `run/launched` marker there
  -> launched; neither -> the cell runs once more (it creates the marker exclusively, so a
  second run never starts a second wrapper), and a second failure is the job's (FAILED);
- a client that exited 0 without the sentinel ran the whole cell, which failed: FAILED, with
  the cell's output.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import IO

from worker.colab.driver import ColabDriver
from worker.errors import ColabError, ColabqError, RemotePathNotFound
from worker.fleet.causes import GpuMismatch
from worker.session import plan as vmplan
from worker.session.job import LAUNCH_TIMEOUT_S, Finish, JobRun, sentinel
from worker.states import JobState as S

# Past the cell's `--timeout`, how long the client may take to say so before it is killed.
EXEC_GRACE_S = 30.0
TAIL_CHARS = 300


class Verdict(StrEnum):
    LAUNCHED = "launched"  # the wrapper was started (or is being started by the cell)
    VM_LOST = "vm_lost"  # the session is gone
    AGAIN = "again"  # not launched as far as the VM shows, the session may be alive


@dataclass(frozen=True)
class ExecEnd:
    """How one launch client ended, as far as the runner waits for it."""

    launched: str | None  # the sentinel's value (the wrapper's pid, or `again:<pid>`)
    returncode: int | None  # None: still running (sentinel read) or killed past its time
    output: str  # what it printed before the sentinel or its end (stdout, then stderr's tail)
    gpu: str | None = None  # the GPU the VM has, when it is not the one allocated

    @property
    def failure(self) -> str:
        rc = self.returncode
        how = (
            "ran past its time and was killed"
            if rc is None
            else f"was killed by a signal ({rc})"
            if rc < 0
            else f"exited {rc}"
        )
        tail = self.output.strip()[-TAIL_CHARS:]
        return f"colab exec {how}" + (f": {tail}" if tail else "")


@dataclass(frozen=True)
class VmFacts:
    """What the VM says after a launch client failed."""

    alive: bool | None  # None: `colab status` failed
    marker: bool | None  # `run/launched` exists; None: not read (failed, or the session is gone)


def decide(facts: VmFacts) -> Verdict:
    """A gone session wins (the marker could not be read there anyway); then the marker."""
    if facts.alive is False:
        return Verdict.VM_LOST
    if facts.marker:
        return Verdict.LAUNCHED
    return Verdict.AGAIN


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _pump(proc: subprocess.Popen[bytes], lines: queue.Queue[str | None]) -> None:
    """Every stdout line to `lines`, then None at EOF; then reap the client (never a zombie)."""
    out: IO[bytes] | None = proc.stdout
    if out is not None:
        with out:
            for raw in iter(out.readline, b""):
                lines.put(raw.decode("utf-8", "replace"))
    lines.put(None)
    proc.wait()


def stream_launch(
    driver: ColabDriver, name: str, cell: Path, nonce: str, timeout_s: float, err_log: Path
) -> ExecEnd:
    """Run the launch cell; return as soon as its sentinel is read (the client may linger on
    in its own process group), or when the client ends or runs past `timeout_s` + grace."""
    argv = driver.exec_argv(name, cell, timeout_s)
    with open(err_log, "ab") as err:
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                env=driver.exec_env(), start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            raise ColabError(f"Cannot run {argv[0]}: {exc}") from exc
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_pump, args=(proc, lines), daemon=True).start()
    deadline = time.monotonic() + timeout_s + EXEC_GRACE_S
    seen: list[str] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            _kill_group(proc.pid)
            return ExecEnd(None, None, "".join(seen) + _tail(err_log))
        try:
            line = lines.get(timeout=min(left, 1.0))
        except queue.Empty:
            continue
        if line is None:
            break
        seen.append(line)
        if (value := sentinel(line, nonce, "LAUNCHED")) is not None:
            return ExecEnd(value, None, "".join(seen))
        if (gpu := sentinel(line, nonce, "GPU")) is not None:
            return ExecEnd(None, None, "".join(seen), gpu=gpu)
    try:
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        return ExecEnd(None, None, "".join(seen) + _tail(err_log))
    return ExecEnd(None, rc, "".join(seen) + _tail(err_log))


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, path.stat().st_size - 4 * TAIL_CHARS))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def probe_vm(
    driver: ColabDriver, name: str, job_id: str, scratch: Path, timeout_s: float
) -> VmFacts:
    """Is the session there, and does the wrapper's `run/launched` marker exist on it?"""
    try:
        alive: bool | None = driver.status(name) is not None
    except ColabError:
        alive = None
    if alive is False:
        return VmFacts(False, None)
    marker: bool | None
    try:
        driver.download(
            name, f"{vmplan.remote_job_dir(job_id)}/run/launched", scratch, timeout_s=timeout_s
        )
        marker = True
    except RemotePathNotFound:
        marker = False
    except ColabError:
        marker = None
    finally:
        scratch.unlink(missing_ok=True)
    return VmFacts(alive, marker)


def lost_while_launching(run: JobRun, how: str) -> Finish | None:
    """The VM went away around the launch: VM_LOST (or a restart), named as the runner names a
    lost VM elsewhere; None when the store shows the job ended (its VM released itself): the
    follower then settles it from the store."""
    v = run._verify_quietly()
    if v is not None and v.exit_code is not None:
        return None
    synced = v.summary() if v is not None else "the store could not be read"
    reason = f"the VM was lost ({how}) while the job was being launched; last synced: {synced}"
    return Finish(S.RESTARTING if run.restarts < run.spec.max_restarts else S.VM_LOST, reason)


def launch_job(run: JobRun, cell: Path) -> str:
    """Run the launch cell until the VM says the job was launched: returns what tells it (the
    sentinel's wrapper pid, or the marker). Raises Finish when the VM is gone, ColabqError when
    the cell itself failed or twice no client could say."""
    d, name = run.d, run.name
    assert name is not None
    failures: list[str] = []
    for attempt in (1, 2):
        d.fence()
        err_log = run.files.root / f"launch-{run.segment}-{attempt}.err"
        end = stream_launch(d.driver, name, cell, run.nonce, LAUNCH_TIMEOUT_S, err_log)
        if end.launched is not None:
            return f"wrapper pid {end.launched}"
        if end.gpu is not None:
            # Colab served another GPU than the one allocated: capacity, not the job's fault.
            raise GpuMismatch(run.gpu, end.gpu)
        if end.returncode == 0:
            # The whole cell ran, and it did not start the job.
            tail = end.output.strip()[-TAIL_CHARS:]
            raise ColabqError(f"the launch cell did not start the job: {tail}")
        failures.append(end.failure)
        run.log(f"the launch exec ended without its sentinel ({end.failure}); asking the VM")
        scratch = run.files.root / "launched-probe"
        facts = probe_vm(d.driver, name, run.job_id, scratch, d.settings.colab_call_timeout_s)
        verdict = decide(facts)
        if verdict is Verdict.LAUNCHED:
            return "the VM's run/launched marker"
        if verdict is Verdict.VM_LOST:
            lost = lost_while_launching(run, "colab status: the session is gone")
            if lost is not None:
                raise lost
            return "the store (the job ended and its VM released itself)"
        if attempt == 1:
            run.log("the VM shows no launch and the session is there: launching again (once)")
    raise ColabqError(f"the launch cell did not start the job: {'; '.join(failures)}")
