"""Progress on the console's way: the real attach cell frames a bar's `\\r` updates before its line
ends (kind `p`, no bytes of the console); the attach client reads the run's progress from them
and from whole lines, never forwards a `p` item as a line, and writes the reading in the very
script call that forwards lines (no round trip of its own while lines flow), the last one with
the cell's end."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import fakeredis

from worker.progress import record
from worker.records.forward import Feed, Lines
from worker.records.keys import Keys
from worker.session import attach
from worker.session.cells import attach_source

NONCE = "n0nce"
JOB = "job1"


def bar(n: int, total: int = 100) -> str:
    return f"\r{100 * n // total:3d}%|          | {n}/{total} [00:01<00:09,  9.90it/s]"


def test_the_cell_frames_a_bars_updates_before_its_line_ends(tmp_path: Path) -> None:
    run = tmp_path / "content" / "colab-jobs" / JOB / "run"
    run.mkdir(parents=True)
    console = run / "console.log"
    console.write_bytes(b"hello\n" + bar(5).encode())
    (run / "launched").write_text("")  # no wrapper pid yet: alive for 30 s
    cell = tmp_path / "attach.py"
    cell.write_text(attach_source(JOB, NONCE, 0))
    proc = subprocess.Popen(
        [sys.executable, str(cell)], cwd=tmp_path / "content", stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        first = [proc.stdout.readline().decode() for _ in range(2)]
        assert first[0] == f"@{NONCE}:0:6:l:hello\n"
        assert first[1] == f"@{NONCE}:6:6:p:{bar(5)}\n"  # no bytes: the line is not over
        with console.open("ab") as out:  # the bar moves, then its line ends
            out.write((bar(50) + bar(100)).encode())
        line = proc.stdout.readline().decode()
        assert line == f"@{NONCE}:6:6:p:{bar(5) + bar(50) + bar(100)}\n"
        with console.open("ab") as out:
            out.write(f"\n__COLABQ_{NONCE}_DONE__=0\n".encode())
        rest = proc.stdout.read().decode().rstrip("\n").split("\n")  # (lines hold \r)
    finally:
        proc.kill()
        proc.wait()
    whole = len(b"hello\n" + (bar(5) + bar(50) + bar(100)).encode() + b"\n")
    assert rest[0] == f"@{NONCE}:6:{whole}:l:{bar(5) + bar(50) + bar(100)}"
    assert rest[-1].endswith(":e:END=" + str(whole + len(f"__COLABQ_{NONCE}_DONE__=0\n")))


class CountingFeed(Feed):
    """The real forward script (on fakeredis), its calls counted."""

    calls: list[tuple[int, str]]

    def forward_lines(self, job_id: str, segment: int, lines: Lines, progress: str = "") -> int:
        self.calls.append((lines.size, progress))
        return super().forward_lines(job_id, segment, lines, progress)


def fake_colab(path: Path, lines: list[str]) -> Path:
    (path.parent / "cell-output").write_text("\n".join(lines) + "\n")
    path.write_text(f"#!/bin/sh\nexec cat {path.parent / 'cell-output'}\n")
    path.chmod(0o755)
    return path


def test_progress_rides_with_the_lines_and_p_items_never_reach_the_stream(
    tmp_path: Path,
) -> None:
    items, pos, texts = [], 0, []
    for i in range(5000):
        text = f"loss {i}"
        items.append(f"@{NONCE}:{pos}:{pos + len(text) + 1}:l:{text}")
        texts.append(text)
        pos += len(text) + 1
        if i % 500 == 0:  # a Keras step bar's update: `=` in it is no sentinel
            items.append(f"@{NONCE}:{pos}:{pos}:p:\r {i // 50}/100 [====>....] - ETA: 5s")
    keras_end = " 100/100 [==============================] - 2s 20ms/step"
    items.append(f"@{NONCE}:{pos}:{pos + len(keras_end) + 1}:l:{keras_end}")
    texts.append(keras_end)
    pos += len(keras_end) + 1
    items += [f"@{NONCE}:{pos}:{pos}:s:DONE=0", f"@{NONCE}:{pos}:{pos}:e:END={pos}"]
    feed = CountingFeed(fakeredis.FakeRedis(), Keys("t"), log_maxlen=100_000, retention_s=60)
    feed.calls = []
    colab = fake_colab(tmp_path / "colab", items)
    spec = attach.AttachSpec(JOB, "s", NONCE, 0, str(colab), str(tmp_path / "c.json"), 60.0)
    started = time.perf_counter()
    result = attach.follow(spec, feed, tmp_path, dict(os.environ), retry_s=1.0)
    took = time.perf_counter() - started
    assert result.end_recorded and result.offset == pos
    got = [f[b"line"].decode() for _, f in feed.r.xrange(feed.keys.log(JOB))]
    assert got == texts  # every line once, no `p` item among them
    watch = {k.decode(): v.decode() for k, v in feed.r.hgetall(feed.keys.watch(JOB)).items()}
    assert set(watch) == {"log_offset", "exec_done", "exec_end", record.FIELD}
    reading = record.decode(watch[record.FIELD])
    assert reading is not None and (reading.done, reading.total) == (100, 100)
    # No call of its own: the reading went with a batch of lines (the last one, with the end).
    assert all(size for size, _ in feed.calls), feed.calls
    assert feed.calls[-1][1] and record.decode(feed.calls[-1][1]) == reading
    print(f"{len(texts)} lines, {len(feed.calls)} calls, {took:.2f}s")


def test_bar_updates_without_lines_are_one_write_of_the_newest_reading() -> None:
    """Only bar updates (a quiet job's bar): the newest reading goes alone, once, not one
    write per update (`feed.Outbox` spaces such writes by `WRITE_EVERY_S`)."""
    feed = CountingFeed(fakeredis.FakeRedis(), Keys("t"), log_maxlen=100, retention_s=60)
    feed.calls = []
    runs: list[attach.Run | None] = [
        attach.Run(attach.NO_LINES, "", f"reading-{i}") for i in range(50)
    ]
    queue_: attach.queue.Queue[attach.Run | None] = attach.queue.Queue()
    for r in [*runs, None]:
        queue_.put(r)
    spec = attach.AttachSpec(JOB, "s", NONCE, 0, "colab", "c.json", 60.0)
    fwd = attach.Forwarder(feed, spec, 0, retry_s=1.0)
    assert attach._forward_all(queue_, fwd)
    assert feed.calls == [(0, "reading-49")]
