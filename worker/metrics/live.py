"""The jobs not yet ended, as the metrics process keeps them: read once from the ledger's index
of them (`Keys.active`, in pipelined pages), then kept from the event log (`worker.records.events`:
every submit and state change is an entry, written with the change), so that a scrape counts
jobs by state without reading any job.

`LiveJobs.load` notes the log's newest entry first, then reads the index, then `follow` applies
every entry after that one: a job changed meanwhile is read again, and reading a job again is
harmless (its record's current fields replace the kept ones; an ended or missing job is dropped).
`follow` blocks on the log (XREAD) and reads the jobs its entries name, one pipelined round trip
a batch. Everything read is checked where it enters: an id that is not a job id, or a record
whose state or creation time does not parse, is not kept (and counted as skipped).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from worker.metrics import labels
from worker.records import events, ids
from worker.records.keys import Keys
from worker.states import HOLDS_SESSION, TERMINAL, JobState

FIELDS = ("state", "gpu", "account", "user", "created_at", "restarts", "putbacks")
PAGE = 1000
_ENDED = frozenset(s.value for s in TERMINAL)


@dataclass(frozen=True)
class LiveJob:
    state: JobState
    gpu: str  # labels, cleaned
    account: str
    user: str
    created_at: float
    restarts: int = 0
    putbacks: int = 0

    @property
    def holds_session(self) -> bool:
        return self.state in HOLDS_SESSION


def parse_job(values: list[bytes | None]) -> LiveJob | None:
    """A live job from its record's `FIELDS`, or None (ended, missing or damaged)."""
    d = dict(zip(FIELDS, values, strict=True))
    try:
        state = JobState((d["state"] or b"").decode())
        created = float(d["created_at"] or b"nan")
    except (ValueError, UnicodeDecodeError):
        return None
    if state in TERMINAL or not math.isfinite(created):
        return None
    return LiveJob(
        state, labels.gpu(d["gpu"]), labels.clean(d["account"]), labels.clean(d["user"]),
        created, _int(d["restarts"]), _entries(d["putbacks"]),
    )  # fmt: skip


def _int(raw: bytes | None) -> int:
    try:
        return max(int(raw or b"0"), 0)
    except ValueError:
        return 0


def _entries(raw: bytes | None) -> int:
    try:
        got = json.loads(raw or b"[]")
    except ValueError:
        return 0
    return len(got) if isinstance(got, list) else 0


class LiveJobs:
    """The live jobs by id, safe to read (`snapshot`) while a thread follows the log."""

    def __init__(self, r: Any, keys: Keys, *, page: int = PAGE) -> None:
        self.r, self.keys, self.page = r, keys, page
        self.after = "0-0"  # the last log entry applied
        self.skipped = 0  # ids and records that did not parse, since the start
        self._jobs: dict[str, LiveJob] = {}
        self._lock = threading.Lock()

    def snapshot(self) -> dict[str, LiveJob]:
        with self._lock:
            return dict(self._jobs)

    def load(self) -> int:
        """Read every live job again (the index, in pages); returns how many there are."""
        after = events.last_id(self.r, self.keys)
        found = sorted(self._valid(m.decode(errors="replace") for m in
                                   self.r.smembers(self.keys.active())))  # fmt: skip
        jobs: dict[str, LiveJob] = {}
        for start in range(0, len(found), self.page):
            jobs.update(self._read(found[start : start + self.page]))
        with self._lock:
            self._jobs, self.after = jobs, after
        return len(jobs)

    def follow(self, block_ms: int) -> int:
        """Apply the log's entries after the last one applied (waiting up to `block_ms` for the
        first); returns how many entries there were."""
        got, after, skipped = events.wait(self.r, self.keys, self.after, block_ms=block_ms)
        self.skipped += skipped  # entries that did not decode
        if not got:
            self.after = after
            return skipped
        touched = {e.job for e in got if e.kind in (events.STATE, "submit")}
        fresh = self._read(sorted(self._valid(touched)))
        with self._lock:
            for job_id in touched:
                if job_id in fresh:
                    self._jobs[job_id] = fresh[job_id]
                else:
                    self._jobs.pop(job_id, None)
            self.after = after
        return len(got) + skipped

    def _valid(self, job_ids: Iterable[str]) -> set[str]:
        out = set()
        for job_id in job_ids:
            if ids.job_id(job_id) is not None:
                out.add(job_id)
            else:
                self.skipped += 1
        return out

    def _read(self, ids: list[str]) -> Mapping[str, LiveJob]:
        """The live ones of `ids`: one pipelined round trip."""
        if not ids:
            return {}
        pipe = self.r.pipeline(transaction=False)
        for job_id in ids:
            pipe.hmget(self.keys.job(job_id), *FIELDS)
        out = {}
        for job_id, values in zip(ids, pipe.execute(), strict=True):
            job = parse_job(values)
            if job is not None:
                out[job_id] = job
            elif values[0] is not None and values[0].decode(errors="replace") not in _ENDED:
                self.skipped += 1  # a record there, not ended, that does not parse
        return out
