"""The background `colab exec` client: runs the driver on the VM and streams its output to Redis.

Spawned by the runner in its own session, so it outlives the worker process (a worker crash must
not cost the training run). It forwards each output line to the job's log stream as it arrives,
reads the wrapper's sentinels (`__COLABQ_<nonce>_<WHAT>__=<value>`) and, when `colab exec`
returns, writes what it saw to a result file that the runner (or a restarted worker) reads.

    python -m worker.session.attach --job ID --nonce N --result PATH -- colab --config … exec …
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO

from worker.session.jobfiles import ProcRef

_SENTINEL = re.compile(r"^__COLABQ_(?P<nonce>[0-9a-f]+)_(?P<what>[A-Z_]+)__=(?P<value>.*)$")


def parse_sentinel(line: str, nonce: str) -> tuple[str, str] | None:
    m = _SENTINEL.match(line.strip())
    if not m or m["nonce"] != nonce:
        return None
    return m["what"], m["value"]


@dataclass
class ExecResult:
    """What the exec client saw. `sentinels` maps WHAT -> value (EXIT, FINAL_UPLOAD, ...)."""

    exec_rc: int | None = None
    sentinels: dict[str, str] = field(default_factory=dict)
    error: str = ""
    after_release: list[str] = field(default_factory=list)
    sentinel_at: dict[str, float] = field(default_factory=dict)  # when each arrived (epoch s)

    @property
    def exit_code(self) -> int | None:
        v = self.sentinels.get("EXIT")
        return int(v) if v is not None and v.lstrip("-").isdigit() else None

    def dump(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)))
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> ExecResult | None:
        try:
            d = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return cls(
            exec_rc=d.get("exec_rc"),
            sentinels=d.get("sentinels", {}),
            error=d.get("error", ""),
            after_release=d.get("after_release", []),
            sentinel_at=d.get("sentinel_at", {}),
        )


def _pump(
    pipe: IO[bytes],
    stream: str,
    nonce: str,
    result: ExecResult,
    emit: LineSink,
    lock: threading.Lock,
) -> None:
    for raw in iter(pipe.readline, b""):
        line = raw.decode(errors="replace").rstrip("\n")
        hit = parse_sentinel(line, nonce)
        with lock:
            if hit:
                result.sentinels[hit[0]] = hit[1]
                result.sentinel_at[hit[0]] = time.time()
            elif "SELF_RELEASE" in result.sentinels and stream == "err":
                # The VM released itself after a verified final upload: colab exec's
                # "connection lost" traceback is expected, not the job's output.
                result.after_release.append(line)
            else:
                emit(line, stream)


class LineSink:
    """Sends lines to the job's Redis stream; falls back to stderr if Redis is unreachable."""

    def __init__(self, job_id: str) -> None:
        from worker.deps import build_ledger
        from worker.settings import load_settings

        self.job_id = job_id
        self.ledger = build_ledger(load_settings())

    def record(self, result: ExecResult) -> None:
        """What a janitor on another host needs to settle the job if this worker dies."""
        fields = {f"exec_{k.lower()}": v for k, v in result.sentinels.items()}
        fields["exec_done_at"] = repr(time.time())
        try:
            self.ledger.record_watch(self.job_id, fields)
        except Exception as exc:
            print(f"colabq execclient: recording the result failed ({exc})", file=sys.stderr)

    def __call__(self, line: str, stream: str) -> None:
        try:
            self.ledger.append_log(self.job_id, line, stream)
        except Exception as exc:  # the run must go on even if Redis blips
            print(f"colabq execclient: log append failed ({exc}): {line}", file=sys.stderr)


def run(argv: list[str], nonce: str, result_path: Path, emit: LineSink) -> ExecResult:
    result = ExecResult()
    lock = threading.Lock()
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    except OSError as exc:
        result.error = f"cannot start colab exec: {exc}"
        result.dump(result_path)
        return result
    assert proc.stdout is not None and proc.stderr is not None
    threads = [
        threading.Thread(target=_pump, args=(proc.stdout, "out", nonce, result, emit, lock)),
        threading.Thread(target=_pump, args=(proc.stderr, "err", nonce, result, emit, lock)),
    ]
    for t in threads:
        t.start()
    result.exec_rc = proc.wait()
    for t in threads:
        t.join()
    if result.after_release:
        last = result.after_release[-1].strip()
        emit(f"[colabq] the VM released itself; colab exec ended with: {last}", "colabq")
    result.dump(result_path)
    return result


class ExecProcess:
    """The handle the runner keeps on the background exec client."""

    def __init__(self, pid: int, popen: subprocess.Popen[bytes] | None = None) -> None:
        self.pid = pid
        self.popen = popen
        self.ref = ProcRef.of(pid)

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return bool(self.ref and self.ref.alive())

    def wait(self, timeout_s: float) -> bool:
        """Block up to `timeout_s` for the client to exit (returns at once when it does)."""
        if self.popen is not None:
            try:
                self.popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                return False
            return True
        return not self.alive()

    def kill(self) -> None:
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
            if self.popen is not None:
                self.popen.wait(timeout=10)


Spawner = Callable[[list[str], Path, Mapping[str, str]], ExecProcess]


def spawn_detached(argv: list[str], log_path: Path, env: Mapping[str, str]) -> ExecProcess:
    """Start the exec client in its own session so it outlives this worker process."""
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=dict(env),
            start_new_session=True,
        )  # fmt: skip
    return ExecProcess(proc.pid, proc)


def main(args: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="worker.session.attach")
    p.add_argument("--job", required=True)
    p.add_argument("--nonce", required=True)
    p.add_argument("--result", required=True, type=Path)
    p.add_argument("argv", nargs=argparse.REMAINDER)
    a = p.parse_args(args)
    argv = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    sink = LineSink(a.job)
    res = run(argv, a.nonce, a.result, sink)
    sink.record(res)
    return 0 if res.exec_rc is not None else 1


if __name__ == "__main__":
    sys.exit(main())
