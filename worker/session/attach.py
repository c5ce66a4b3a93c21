"""The attach client: a background process on the worker host that follows the job's console on
the VM and forwards it to the job's Redis stream, every line exactly once.

    python -m worker.session.attach JOB_DIR

It reads `attach.json` (session, nonce, segment, CLI, timeout) from the job folder and the
recorded console offset from Redis, writes the attach cell for that offset, and runs
`colab exec -f` on it as its own child, in its own process group (the owner ends both with one
`killpg`). A reader thread turns the cell's framed lines into items; the main thread forwards
them in batches, each batch with the offset it reaches in one atomic Redis step, so a client that
dies at any moment leaves an offset the next one resumes from. Through a Redis outage the batch
is retried with backoff while the reader keeps reading. A gap in the offsets (output lost on the
way) or a newer segment ends it: the owner attaches again from the recorded offset.

Exit status: 0 once the cell's end was recorded; 1 otherwise (the owner decides what next).
Nothing here ever stops a session or touches the job: the run lives on the VM.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO

from worker.records.ledger import ForwardItem, Ledger
from worker.session.plan import attach_source

BATCH_MAX = 1000  # items per Redis round trip
BATCH_WAIT_S = 0.05  # how long a batch waits for more lines before it goes
PROGRESS_FILE = "attach-progress.json"
EXEC_OVER_GRACE_S = 2.0


@dataclass(frozen=True)
class AttachSpec:
    """What one attach client needs; written by the owner, read by the client."""

    job_id: str
    session: str
    nonce: str
    segment: int
    colab_bin: str
    config_path: str
    timeout_s: float  # the attach cell's `--timeout`: what is left of the wall cap, and more

    def dump(self, path: Path) -> None:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(asdict(self)))
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> AttachSpec:
        return cls(**json.loads(path.read_text()))


@dataclass
class AttachResult:
    """What the client saw, for the owner's log and for people."""

    exec_rc: int | None = None
    end_recorded: bool = False
    gap: str = ""
    stale: bool = False
    error: str = ""
    offset: int = 0
    chatter: list[str] = field(default_factory=list)

    def dump(self, path: Path) -> None:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(asdict(self)))
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> AttachResult | None:
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None


@dataclass(frozen=True)
class Framed:
    start: int
    item: ForwardItem


def parse_framed(line: str, nonce: str) -> Framed | None:
    """`@<nonce>:<start>:<end>:<kind>:<text>` -> the item; None for anything else (the CLI's
    own chatter)."""
    head = f"@{nonce}:"
    if not line.startswith(head):
        return None
    parts = line[len(head) :].split(":", 3)
    if len(parts) != 4 or parts[2] not in ("l", "s", "e"):
        return None
    try:
        start, end = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return Framed(start, ForwardItem(end, parts[2], parts[3]))


class Forwarder:
    """Sends items to Redis in order, checking offsets are contiguous."""

    def __init__(self, ledger: Ledger, spec: AttachSpec, offset: int, retry_s: float) -> None:
        self.ledger, self.spec = ledger, spec
        self.expected = offset
        self.retry_s = retry_s
        self.result = AttachResult(offset=offset)
        # Set when the cell's output ended: from then on a Redis outage is waited out only
        # EXEC_OVER_GRACE_S, so a finished job's VM is not kept "busy" by this client; the
        # lines not yet forwarded stay on the VM, and the next attach forwards them.
        self.exec_over_at: float | None = None

    def accept(self, framed: Framed) -> bool:
        """False when the item does not start where the last one ended: output was lost."""
        if framed.start != self.expected:
            self.result.gap = f"expected offset {self.expected}, got {framed.start}"
            return False
        self.expected = framed.item.end_offset
        return True

    def send(self, items: list[ForwardItem]) -> bool:
        """Forward one batch, retrying through an outage; False if this client is stale (a
        newer segment) or Redis stayed away past the retry budget."""
        deadline = time.monotonic() + self.retry_s
        delay = 0.1
        while True:
            try:
                got = self.ledger.forward(self.spec.job_id, self.spec.segment, items)
            except Exception as exc:  # Redis away: the lines stay re-readable on the VM
                over = self.exec_over_at
                if time.monotonic() >= deadline or (
                    over is not None and time.monotonic() - over >= EXEC_OVER_GRACE_S
                ):
                    self.result.error = f"Redis unreachable: {exc}"
                    return False
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            if got < 0:
                self.result.stale = True
                return False
            self.result.offset = got
            if any(it.kind == "e" for it in items):
                self.result.end_recorded = True
            return True


class Progress:
    """What this client has received from the cell (whatever Redis does), in a local file the
    owner reads: a client alive but receiving nothing while the VM's console grows has lost its
    connection (a real `colab exec` then waits for its `--timeout`)."""

    def __init__(self, path: Path, offset: int) -> None:
        self.path, self.received, self.written_at = path, offset, 0.0
        self.write(force=True)

    def update(self, offset: int) -> None:
        self.received = offset
        self.write()

    def write(self, *, force: bool = False) -> None:
        now = time.time()
        if force or now - self.written_at >= 0.5:
            self.written_at = now
            data = {"pid": os.getpid(), "received": self.received, "at": now}
            tmp = self.path.with_name(f".{self.path.name}.tmp")
            tmp.write_text(json.dumps(data))
            os.replace(tmp, self.path)


def read_progress(path: Path) -> tuple[int, int, float] | None:
    """(client pid, bytes received up to, when) from a client's progress file."""
    try:
        d = json.loads(path.read_text())
        return int(d["pid"]), int(d["received"]), float(d["at"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _read(
    pipe: IO[bytes],
    nonce: str,
    out: queue.Queue[Framed | None],
    chatter: list[str],
    progress: Progress,
    fwd: Forwarder,
) -> None:
    for raw in iter(pipe.readline, b""):
        line = raw.decode("utf-8", errors="replace").rstrip("\n")
        framed = parse_framed(line, nonce)
        if framed is None:
            if line.strip():
                chatter.append(line[:500])
                print(f"colab exec: {line}", file=sys.stderr, flush=True)
        else:
            progress.update(framed.item.end_offset)
            out.put(framed)
    progress.write(force=True)
    fwd.exec_over_at = time.monotonic()
    out.put(None)


def _drain_stderr(pipe: IO[bytes], result: AttachResult) -> None:
    for raw in iter(pipe.readline, b""):
        line = raw.decode("utf-8", errors="replace").rstrip()
        if line.strip():
            result.error = line.strip()[:500]
            print(f"colab exec (stderr): {line}", file=sys.stderr, flush=True)


def follow(
    spec: AttachSpec, ledger: Ledger, job_dir: Path, env: dict[str, str], retry_s: float
) -> AttachResult:
    offset = int(ledger.read_watch(spec.job_id).get("log_offset", "0") or 0)
    cell = job_dir / f"attach-{spec.segment}-{offset}.py"
    cell.write_text(attach_source(spec.job_id, spec.nonce, offset))
    fwd = Forwarder(ledger, spec, offset, retry_s)
    argv = [
        spec.colab_bin, "--config", spec.config_path, "exec", "-s", spec.session,
        "--timeout", repr(float(spec.timeout_s)), "-f", str(cell),
    ]  # fmt: skip
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
    except OSError as exc:
        fwd.result.error = f"cannot start colab exec: {exc}"
        return fwd.result
    assert proc.stdout is not None and proc.stderr is not None
    items: queue.Queue[Framed | None] = queue.Queue()
    progress = Progress(job_dir / PROGRESS_FILE, offset)
    reader = threading.Thread(
        target=_read,
        args=(proc.stdout, spec.nonce, items, fwd.result.chatter, progress, fwd),
        daemon=True,
    )
    errs = threading.Thread(target=_drain_stderr, args=(proc.stderr, fwd.result), daemon=True)
    reader.start()
    errs.start()
    ok = _forward_all(items, fwd)
    if (not ok or fwd.result.end_recorded) and proc.poll() is None:
        # Done, or nothing more can be forwarded: the cell has no reason to go on.
        proc.kill()
    fwd.result.exec_rc = proc.wait()
    errs.join(timeout=5)
    return fwd.result


def _forward_all(items: queue.Queue[Framed | None], fwd: Forwarder) -> bool:
    """Forward until the cell's end, the stream's end, a gap or a stale segment."""
    finished = False
    while not finished:
        first = items.get()
        if first is None:
            return True
        batch: list[Framed] = [first]
        deadline = time.monotonic() + BATCH_WAIT_S
        while len(batch) < BATCH_MAX:
            try:
                nxt = items.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if nxt is None:
                finished = True
                break
            batch.append(nxt)
        good: list[ForwardItem] = []
        for framed in batch:
            if not fwd.accept(framed):
                finished = True
                break
            good.append(framed.item)
        if good and not fwd.send(good):
            return False
        if fwd.result.end_recorded or fwd.result.gap:
            return not fwd.result.gap
    return True


def main(args: list[str] | None = None) -> int:
    argv = sys.argv[1:] if args is None else args
    job_dir = Path(argv[0])
    from worker.deps import build_ledger
    from worker.settings import load_settings

    settings = load_settings()
    spec = AttachSpec.load(job_dir / "attach.json")
    ledger = build_ledger(settings)
    result = follow(spec, ledger, job_dir, dict(os.environ), settings.redis_retry_s)
    result.dump(job_dir / "attach-result.json")
    return 0 if result.end_recorded else 1


if __name__ == "__main__":
    sys.exit(main())
