"""The attach client: a background process on the worker host that follows the job's console on
the VM and forwards it to the job's Redis stream, every line exactly once.

    python -m worker.session.attach JOB_DIR

It reads `attach.json` (session, nonce, segment, CLI, timeout) from the job folder and the
recorded console offset from Redis, writes the attach cell for that offset, and runs
`colab exec -f` on it as its own child, in its own process group (the owner ends both with one
`killpg`). A reader thread turns the cell's output, a pipe read in chunks, into runs of framed
items that follow on from each other; the main thread forwards them in batches, each batch with
the offset it reaches in one atomic Redis step, so a client that dies at any moment leaves an
offset the next one resumes from. Through a Redis outage the batch is retried with backoff while
the reader keeps reading. A gap in the offsets (output lost on the way) or a newer segment ends
it: the owner attaches again from the recorded offset.

It runs once per held session for the whole run, so it imports only what it uses: redis-py and
`worker.records.forward` (never the contract, pydantic, nor the settings object). A chatty job
prints 100k lines in a fraction of a second, so its lines are parsed a chunk at a time by one
regular expression (`framing.py`), and a run waits for Redis as three strings (`forward.Lines`),
not as an object per line: a backlog costs little more memory than its text. The run's progress
is read from the same chunks (`worker.progress.feed`) and goes to Redis with their lines.

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
from typing import IO, Protocol

from worker.progress.feed import Outbox, ProgressFeed, seed_of
from worker.records.forward import Feed, Lines, feed_settings
from worker.session.cells import attach_source
from worker.session.framing import Chain, Run, framed_pattern, parse_chunk
from worker.session.framing import parse_framed as parse_framed  # the client's, as before

# A batch takes runs until it holds this many items (the script holds Redis ~5 ms per 2,000
# lines); one run is what one read brought, ~1,000 lines at most.
BATCH_MAX = 2000
BATCH_WAIT_S = 0.05  # how long a batch waits for more lines before it goes
READ_CHUNK = 1 << 15  # the cell's output is read this much at a time
PROGRESS_FILE = "attach-progress.json"
NO_LINES = Lines("", "", "")
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
    epochs: float | None = None  # the job's own (`--epochs`): a run's length in epochs

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


# --- forwarding -------------------------------------------------------------------------------


class ForwardTarget(Protocol):
    def forward_lines(self, job_id: str, segment: int, lines: Lines, progress: str) -> int: ...


class Forwarder:
    """Sends batches to Redis in order, through an outage."""

    def __init__(
        self, target: ForwardTarget, spec: AttachSpec, offset: int, retry_s: float
    ) -> None:
        self.target, self.spec = target, spec
        self.retry_s = retry_s
        self.result = AttachResult(offset=offset)
        # Set when the cell's output ended: from then on a Redis outage is waited out only
        # EXEC_OVER_GRACE_S, so a finished job's VM is not kept "busy" by this client; the
        # lines not yet forwarded stay on the VM, and the next attach forwards them.
        self.exec_over_at: float | None = None

    def send(self, lines: Lines, progress: str = "") -> bool:
        """Forward one batch (and the run's progress with it), retrying through an outage;
        False if this client is stale (a newer segment) or Redis stayed away past the retry
        budget."""
        deadline = time.monotonic() + self.retry_s
        delay = 0.1
        while True:
            try:
                got = self.target.forward_lines(
                    self.spec.job_id, self.spec.segment, lines, progress
                )
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
            if "e" in lines.kinds:
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
    out: queue.Queue[Run | None],
    chain: Chain,
    chatter: list[str],
    progress: Progress,
    fwd: Forwarder,
    seen: ProgressFeed,
) -> None:
    pattern = framed_pattern(nonce)
    fd = pipe.fileno()
    pending: list[bytes] = []  # a line not yet complete (joined once: a long line costs linear)
    while True:
        chunk = os.read(fd, READ_CHUNK)
        if chunk:
            cut = chunk.rfind(b"\n")
            if cut < 0:
                pending.append(chunk)
                continue
            whole = b"".join([*pending, chunk[:cut]])
            pending = [chunk[cut + 1 :]]
        elif any(pending):
            # The output ended inside a line (the connection died mid-message): the cell ends
            # every item with a newline, so this is a cut item, never forwarded (it would
            # record a truncated line as complete). The next attach reads it again whole.
            rest = b"".join(pending).decode("utf-8", errors="replace")
            chatter.append(f"cut off: {rest[:200]}")
            print(f"colab exec: output cut off inside a line: {rest[:200]}", file=sys.stderr)
            break
        else:
            break
        # A newline never sits inside a UTF-8 sequence: decoding whole lines at once replaces
        # exactly what decoding each one would.
        text = whole.decode("utf-8", errors="replace")
        rows, other = parse_chunk(text, nonce, pattern)
        for line in other:
            if line.strip():
                chatter.append(line[:500])
                print(f"colab exec: {line}", file=sys.stderr, flush=True)
        if rows:
            progress.update(int(rows[-1][1]))
            run = chain.take(seen.see(text, rows))
            news = seen.take()
            if run is None and news and not chain.broken:
                run = Run(NO_LINES)  # only a bar's update: the progress alone
            if run is not None:
                out.put(run._replace(progress=news))
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
    spec: AttachSpec, feed: Feed, job_dir: Path, env: dict[str, str], retry_s: float
) -> AttachResult:
    offset = feed.log_offset(spec.job_id)
    cell = job_dir / f"attach-{spec.segment}-{offset}.py"
    cell.write_text(attach_source(spec.job_id, spec.nonce, offset))
    fwd = Forwarder(feed, spec, offset, retry_s)
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
    runs: queue.Queue[Run | None] = queue.Queue()
    progress = Progress(job_dir / PROGRESS_FILE, offset)
    seen = ProgressFeed(spec.nonce, spec.epochs, seed_of(feed.r, feed.keys.watch(spec.job_id)))
    reader = threading.Thread(
        target=_read,
        args=(proc.stdout, spec.nonce, runs, Chain(offset), fwd.result.chatter, progress, fwd,
              seen),
        daemon=True,
    )  # fmt: skip
    errs = threading.Thread(target=_drain_stderr, args=(proc.stderr, fwd.result), daemon=True)
    reader.start()
    errs.start()
    ok = _forward_all(runs, fwd)
    if (not ok or fwd.result.end_recorded) and proc.poll() is None:
        # Done, or nothing more can be forwarded: the cell has no reason to go on.
        proc.kill()
    fwd.result.exec_rc = proc.wait()
    errs.join(timeout=5)
    return fwd.result


def _forward_all(runs: queue.Queue[Run | None], fwd: Forwarder) -> bool:
    """Forward until the cell's end, the stream's end, a gap or a stale segment. A batch is
    the runs that arrived within BATCH_WAIT_S of its first, until it holds BATCH_MAX items; the
    run's progress goes with a batch every few seconds (`Outbox`), alone if no line comes."""
    outbox = Outbox()
    while True:
        try:
            first = runs.get(timeout=outbox.wait_s())
        except queue.Empty:
            if not fwd.send(NO_LINES, outbox.take(last=True)):
                return False
            continue
        if first is None:
            if outbox.pending:
                fwd.send(NO_LINES, outbox.take(last=True))
            return True
        got, count = [first], first.lines.size
        over = bool(first.gap)  # the output ended or broke: this batch is the last
        deadline = time.monotonic() + BATCH_WAIT_S
        while count < BATCH_MAX and not over:
            try:
                nxt = runs.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if nxt is None:
                over = True
                break
            got.append(nxt)
            count += nxt.lines.size
            over = bool(nxt.gap)
        for r in got:
            outbox.offer(r.progress)
        lines = Lines.join([r.lines for r in got])
        last = over or "e" in lines.kinds
        news = outbox.take(last=last)
        if (count or news) and not fwd.send(lines, news):
            return False
        fwd.result.gap = got[-1].gap
        if fwd.result.end_recorded or over:
            return not fwd.result.gap


def main(args: list[str] | None = None) -> int:
    argv = sys.argv[1:] if args is None else args
    job_dir = Path(argv[0])
    settings = feed_settings()
    spec = AttachSpec.load(job_dir / "attach.json")
    feed = Feed.build(settings)
    result = follow(spec, feed, job_dir, dict(os.environ), settings.redis_retry_s)
    result.dump(job_dir / "attach-result.json")
    return 0 if result.end_recorded else 1


if __name__ == "__main__":
    sys.exit(main())
