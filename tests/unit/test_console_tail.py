"""The tail of a job's console from the copy its final upload stored (`worker.records.tail`): it is
framed exactly as the attach cell frames the VM's console, it reaches the log stream past the
recorded offset once, in order, whichever of the store and an attach client forwards a line
first; and the janitor takes it before it settles a job."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import fakeredis
import pytest

from tests.factories import make_spec
from tests.unit.test_janitor import Calls, _owner_dies, _running_job, deps_for
from worker.clock import FakeClock
from worker.errors import StoreError
from worker.janitor.run import janitor_pass
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.records.tail import BATCH, console_items, forward_stored_tail
from worker.session import attach
from worker.session.cells import attach_source
from worker.spec import ArtifactDest
from worker.states import TERMINAL
from worker.states import JobState as S
from worker.store.artifacts import LocalStore, console_name

NONCE = "abc123"
JOB = "j1"


def sentinel(what: str, value: str) -> bytes:
    return f"__COLABQ_{NONCE}_{what}__={value}\n".encode()


# A console with what a console holds: lines, an empty one, a carriage return, bytes that are not
# UTF-8, a line that looks like another job's sentinel, and the wrapper's own sentinels to DONE.
CONSOLE = b"".join(
    [
        b"colabq: job j1 segment 0 starting\n",
        sentinel("FIRST_UPLOAD", "ok"),
        b"line-1\n",
        b"\n",
        b"progress 10%\rprogress 100%\r\n",
        b"caf\xc3\xa9 and \xff\xfe broken\n",
        b"__COLABQ_other_EXIT__=9\n",
        b"a: b: c\n",
        sentinel("EXIT", "0"),
        sentinel("FINAL_UPLOAD", "ok"),
        sentinel("DONE", "0"),
    ]
)


def attach_cell_items(tmp_path: Path, console: bytes, offset: int) -> list[tuple[int, str, str]]:
    """What the real attach cell prints for `console` from `offset`, parsed as the attach client
    parses it: (end, kind, text), the cell's own END left out."""
    run = tmp_path / "content" / "colab-jobs" / JOB / "run"
    run.mkdir(parents=True)
    (run / "console.log").write_bytes(console)
    (run / "launched").write_text("")  # no wrapper pid: the cell stops on DONE
    cell = tmp_path / "attach.py"
    cell.write_text(attach_source(JOB, NONCE, offset))
    out = subprocess.run(
        [sys.executable, str(cell)], cwd=tmp_path / "content", capture_output=True, timeout=30,
        check=True, env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    ).stdout.decode("utf-8", errors="replace")  # fmt: skip
    rows, other = attach.parse_chunk(out.rstrip("\n"), NONCE, attach.framed_pattern(NONCE))
    assert other == []
    return [(int(end), kind, text) for _, end, kind, text in rows if kind != "e"]


@pytest.mark.parametrize("offset", [0, 7 + len(sentinel("FIRST_UPLOAD", "ok")) + 27])
def test_items_are_framed_as_the_attach_cell_frames_them(tmp_path: Path, offset: int) -> None:
    head = CONSOLE[:offset]
    assert offset == 0 or head.endswith(b"\n")  # a recorded offset is a line's end
    ours = [
        (it.end_offset, it.kind, it.payload)
        for it in console_items(CONSOLE[offset:], offset, NONCE)
    ]
    assert ours == attach_cell_items(tmp_path, CONSOLE, offset)
    assert ours[-1] == (len(CONSOLE), "s", "DONE=0")
    kinds = {payload: kind for _, kind, payload in ours}
    assert kinds["__COLABQ_other_EXIT__=9"] == "l"  # another nonce's sentinel is a line


def test_a_last_line_without_its_newline_is_left_out() -> None:
    items = console_items(b"one\ntwo\nthr", 10, NONCE)
    assert [(it.end_offset, it.payload) for it in items] == [(14, "one"), (18, "two")]
    assert console_items(b"", 5, NONCE) == []


@pytest.fixture
def ledger() -> Ledger:
    return Ledger(fakeredis.FakeRedis(), FakeClock(), Keys("t"), log_maxlen=100_000)


def started(ledger: Ledger, segment: int = 0) -> str:
    job_id, _ = ledger.create(make_spec())
    ledger.record_watch(job_id, {"segment": str(segment)})
    return job_id


def lines_of(ledger: Ledger, job_id: str) -> list[str]:
    return [ln.text for ln in ledger.read_log(job_id, count=100_000) if ln.stream == "out"]


def reader(console: bytes) -> Callable[[int], bytes | None]:
    return lambda offset: console[offset:]


NUMBERED = b"".join(f"line-{i}\n".encode() for i in range(1, 5001)) + sentinel("EXIT", "0")


def test_the_stored_tail_follows_what_was_forwarded_each_line_once(ledger: Ledger) -> None:
    job_id = started(ledger)
    items = console_items(NUMBERED, 0, NONCE)
    # An attach client forwarded the first 1,234 lines before its connection died.
    assert ledger.forward(job_id, 0, items[:1234]) == items[1233].end_offset
    tail = forward_stored_tail(ledger, job_id, 0, NONCE, reader(NUMBERED))
    assert (tail.found, tail.start, tail.lines) == (True, items[1233].end_offset, 5000 - 1234)
    assert tail.offset == len(NUMBERED) and len(items) - 1234 > BATCH  # several batches
    assert lines_of(ledger, job_id) == [f"line-{i}" for i in range(1, 5001)]
    assert ledger.read_watch(job_id)["exec_exit"] == "0"
    assert "the last 3766 line(s)" in tail.summary()
    # Again, and a late attach client replaying its last batch: nothing twice.
    assert forward_stored_tail(ledger, job_id, 0, NONCE, reader(NUMBERED)).lines == 0
    ledger.forward(job_id, 0, items[-10:])
    assert lines_of(ledger, job_id) == [f"line-{i}" for i in range(1, 5001)]


def test_a_client_after_the_store_forwards_only_what_the_copy_lacked(ledger: Ledger) -> None:
    job_id = started(ledger)
    whole = NUMBERED + sentinel("FINAL_UPLOAD", "ok") + sentinel("DONE", "0")
    forward_stored_tail(ledger, job_id, 0, NONCE, reader(NUMBERED))
    # An attach client re-attached from an older offset, reading the VM's whole console.
    ledger.forward(job_id, 0, console_items(whole[100:], 100, NONCE))
    assert lines_of(ledger, job_id) == [f"line-{i}" for i in range(1, 5001)]
    assert ledger.read_watch(job_id)["exec_done"] == "0"


def test_no_copy_or_a_newer_segment_forwards_nothing(ledger: Ledger) -> None:
    job_id = started(ledger, segment=2)
    gone = forward_stored_tail(ledger, job_id, 2, NONCE, lambda offset: None)
    assert not gone.found and "may be missing" in gone.summary()
    stale = forward_stored_tail(ledger, job_id, 1, NONCE, reader(NUMBERED))
    assert stale.offset == 0 and lines_of(ledger, job_id) == []


def test_the_local_store_reads_its_copy_from_an_offset(tmp_path: Path) -> None:
    spec = make_spec(artifact=ArtifactDest(kind="local", repo=str(tmp_path), prefix="run"))
    store = LocalStore()
    assert store.console_tail(spec, 0, 0) is None
    logs = tmp_path / "run" / "logs" / spec.job_id
    logs.mkdir(parents=True)
    (logs / console_name(0)).write_bytes(b"a\nb\n")
    (logs / console_name(3)).write_bytes(b"segment 3\n")
    assert store.console_tail(spec, 0, 2) == b"b\n"
    assert store.console_tail(spec, 0, 9) == b""
    assert store.console_tail(spec, 3, 0) == b"segment 3\n"
    assert console_name(3) == "console.s3.log" and store.console_tail(spec, 1, 0) is None


def test_a_broken_local_store_is_no_copy_or_one_line(tmp_path: Path) -> None:
    """What the job's user may have done to a local store: `logs` a file (no copy), the copy a
    symlink loop (a StoreError, which the owner and the janitor say in one line)."""
    spec = make_spec(artifact=ArtifactDest(kind="local", repo=str(tmp_path), prefix="run"))
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "logs").write_text("not a folder")
    assert LocalStore().console_tail(spec, 0, 0) is None
    (tmp_path / "run" / "logs").unlink()
    logs = tmp_path / "run" / "logs" / spec.job_id
    logs.mkdir(parents=True)
    (logs / console_name(0)).symlink_to(logs / console_name(0))
    with pytest.raises(StoreError, match="Cannot read"):
        LocalStore().console_tail(spec, 0, 0)


def test_the_janitor_takes_the_tail_before_it_settles(ledger: Ledger) -> None:
    job_id = _running_job(ledger)
    ledger.set_fields(job_id, owner="w1", nonce=NONCE, segment="0")
    items = console_items(NUMBERED, 0, NONCE)
    ledger.forward(job_id, 0, items[:100])
    ledger.record_watch(job_id, {"gone_verified_at": "1"})
    _owner_dies(ledger, job_id)
    deps = deps_for(ledger, Calls())
    asked: list[tuple[int, int]] = []

    def console_tail(spec: object, segment: int, offset: int) -> bytes:
        asked.append((segment, offset))
        return NUMBERED[offset:]

    at_the_end: list[list[str]] = []
    transition = ledger.transition

    def spy(job: str, state: S, **kw: Any) -> Any:
        if state in TERMINAL:
            at_the_end.append(lines_of(ledger, job))
        return transition(job, state, **kw)

    ledger.transition = spy  # type: ignore[method-assign]
    report = janitor_pass(replace(deps, console_tail=console_tail), dry_run=False)
    assert at_the_end == [[f"line-{i}" for i in range(1, 5001)]], "all there before the end"
    assert ledger.get(job_id).state is S.SUCCEEDED
    assert asked == [(0, items[99].end_offset)]
    assert lines_of(ledger, job_id) == [f"line-{i}" for i in range(1, 5001)]
    [row] = report.did("settle")
    assert "the last 4900 line(s)" in row.why
    said = [ln.text for ln in ledger.read_log(job_id, count=100_000) if ln.stream == "colabq"]
    assert any(t.startswith("[janitor] the last 4900 line(s)") for t in said), said
