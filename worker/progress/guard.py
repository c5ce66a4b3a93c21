"""The owner's side of a run's progress, called with the job's watch hash each time its follow
loop reads it (no read of its own): the overrun warning, and the text Flower shows.

When the run's rate projects its end past its own time limit (`limit.overrun`), the owner says
so once per segment, early: an `overrun` event in the event log (`colabq events`; the notifier
tells every target that would be told of TIMED_OUT) and a line in the job's log. Once is kept in
Redis, not in this process: the event is appended only by the script that first sets the
watch's `exec_overrun` (cleared with the segment), so an adopter or a restarted owner never says
it twice. Nothing here may fail the job: a fault is logged once and the loop goes on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from worker.progress import record, words
from worker.progress.limit import overrun, warning
from worker.records import events
from worker.states import JobState

if TYPE_CHECKING:
    from worker.records.ledger import Ledger

KIND = events.OVERRUN
FLOWER_EVERY_S = 15.0

# KEYS: watch hash, event log. ARGV: segment, the projection (JSON), the log's MINID, job id,
# the event's kind, its entry (JSON), as `events.append` writes one. Sets `exec_overrun` and
# appends the event only the first time, and only for the job's current segment. Returns 1 when
# it did.
WARN_ONCE = """
if (redis.call('HGET', KEYS[1], 'segment') or '0') ~= ARGV[1] then return 0 end
if redis.call('HSETNX', KEYS[1], 'exec_overrun', ARGV[2]) == 0 then return 0 end
redis.call('XADD', KEYS[2], 'MINID', ARGV[3], '*', 'job', ARGV[4], 'kind', ARGV[5],
           'from', '', 'e', ARGV[6])
return 1
"""


@dataclass
class ProgressGuard:
    ledger: Ledger
    job_id: str
    segment: int
    log: Callable[[str], None]
    on_progress: Callable[[str], None] = lambda text: None  # Flower's job page
    flower_every_s: float = FLOWER_EVERY_S
    warned: bool = False
    _told: str = ""
    _told_eta: bool = False
    _told_at: float = float("-inf")
    _failed: str = field(default="", repr=False)

    def __call__(self, watch: Mapping[str, str]) -> None:
        try:
            self._check(watch)
        except Exception as exc:  # progress is a view: it never stops the follow loop
            why = f"{type(exc).__name__}: {exc}"[:300]
            if why != self._failed:
                self._failed = why
                self.log(f"progress not checked: {why}")

    def _check(self, watch: Mapping[str, str]) -> None:
        reading, limit = record.from_watch(watch)
        if reading is None:
            return
        now = self.ledger.clock.time()
        if not self.warned and "exec_overrun" not in watch:
            p = overrun(reading, limit)
            if p is not None:
                self.warned = True
                text = warning(reading, p)
                facts = {"at": now, "eta_at": p.eta_at, "limit_at": p.limit.at,
                         "over_s": round(p.over_s, 1)}  # fmt: skip
                if self._warn_once(json.dumps(facts), text):
                    self.log(f"time limit: {text}")
        text = words.flower_text(reading, limit, now)
        news = (reading.eta_at is not None) != self._told_eta  # an ETA now: said at once
        if text != self._told and (news or now - self._told_at >= self.flower_every_s):
            self._told, self._told_at = text, now
            self._told_eta = reading.eta_at is not None
            self.on_progress(text)

    def _warn_once(self, facts: str, text: str) -> bool:
        led = self.ledger
        entry = led.entry(JobState.RUNNING, led.clock.time(), text, action=KIND)
        script = led.r.register_script(WARN_ONCE)
        keys = [led.keys.watch(self.job_id), events.events_key(led.keys)]
        args = [str(self.segment), facts, events.minid(led.retention_s), self.job_id, KIND, entry]
        return bool(script(keys=keys, args=args))
