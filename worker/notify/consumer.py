"""The notifier's loop over the event log: a consumer group (`notifier`), so that several
notifier processes share the work and each state change is delivered at least once. An entry is
acknowledged (XACK) only after its deliveries ended (delivered, or failed after the retries,
recorded as a `notify-failed` event and counted for `colabq metrics`); the entries a dead
consumer held longer than `claim_idle_ms` are taken over (XAUTOCLAIM). A failing target never
changes a job.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from worker.errors import JobNotFound
from worker.metrics.counts import count_notify_failure
from worker.notify.deliver import DeliveryFailed, deliver
from worker.notify.targets import Target, wanted
from worker.records import events, ids
from worker.records.ledger import Ledger
from worker.records.record import DamagedRecord
from worker.states import JobState

GROUP = "notifier"
log = logging.getLogger(__name__)


def consumer_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass
class Notifier:
    ledger: Ledger
    targets: Mapping[str, Target]
    deployment: Sequence[str] = ()
    consumer: str = field(default_factory=consumer_name)
    attempts: int = 4  # the first try and three retries
    backoff_s: float = 2.0  # doubled after each failed try
    claim_idle_ms: int = 120_000
    sleep: Callable[[float], None] = time.sleep

    @property
    def key(self) -> str:
        return events.events_key(self.ledger.keys)

    def ensure_group(self, start: str = "$") -> None:
        """Create the consumer group once (from `start`: new events only, by default)."""
        try:
            self.ledger.r.xgroup_create(self.key, GROUP, id=start, mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def poll(self, block_ms: int = 5000) -> int:
        """Handle a dead consumer's pending entries, then new ones (blocking up to `block_ms`
        for the first); returns how many entries were handled."""
        r: Any = self.ledger.r
        reply = r.xautoclaim(self.key, GROUP, self.consumer, self.claim_idle_ms, "0-0", count=100)
        rows = list(reply[1])
        got = r.xreadgroup(GROUP, self.consumer, {self.key: ">"}, count=100,
                           block=None if rows else block_ms)  # fmt: skip
        if got:
            rows += got[0][1]
        for entry_id, raw in rows:
            if raw:  # an entry trimmed away while pending comes back empty
                self._handle_one(entry_id, raw)
            r.xack(self.key, GROUP, entry_id)
        return len(rows)

    def _handle_one(self, entry_id: Any, raw: Any) -> None:
        """One entry, on its own: one that does not decode, or whose handling raises anything
        but a Redis outage, is reported and acknowledged (never handled again: no crash loop)."""
        try:
            ev = events.decode(entry_id, raw)
        except (ValueError, TypeError, KeyError) as exc:
            ids.report("colabq event", f"{self.key} entry {ids.shown(entry_id)}", str(exc))
            return
        try:
            self.handle(ev)
        except (redis.ConnectionError, redis.TimeoutError):
            raise  # left pending: taken again once Redis is back
        except Exception as exc:
            log.error("notifier: event %s of job %s not handled: %s", ev.id, ev.job, exc,
                      exc_info=True)  # fmt: skip

    def run(self, stop: Callable[[], bool]) -> None:
        """Poll until `stop()`; Redis out of reach is waited for (the entries stay pending)."""
        while not stop():
            try:
                self.ensure_group()
                while not stop():
                    self.poll()
            except (redis.ConnectionError, redis.TimeoutError):
                self.sleep(2.0)

    def handle(self, ev: events.Event) -> None:
        """A state change goes to the targets that want its state; a projected overrun of the
        job's time limit (`events.OVERRUN`) to those that want TIMED_OUT, which it warns of."""
        if ev.kind == events.STATE:
            told = ev.dst
        elif ev.kind == events.OVERRUN:
            told = JobState.TIMED_OUT.value
        else:
            return
        try:
            rec = self.ledger.get(ev.job)
            job_notify, run_name = rec.spec.notify, rec.spec.run_name
        except (JobNotFound, DamagedRecord):  # the deployment's targets are still told
            job_notify, run_name = (), ""
        payload = {**ev.to_json(), "run_name": run_name}
        for name, states in wanted(job_notify, self.deployment).items():
            if JobState(told) not in states:
                continue
            target = self.targets.get(name)
            if target is None:
                self._failed(ev, name, f"no notification target named {name} on the notifier host")
                continue
            self._deliver(target, ev, payload)

    def _deliver(self, target: Target, ev: events.Event, payload: Mapping[str, object]) -> None:
        why = ""
        for attempt in range(self.attempts):
            if attempt:
                self.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                deliver(target, payload)
                return
            except DeliveryFailed as exc:
                why = str(exc)
        self._failed(ev, target.name, f"{why} ({self.attempts} tries)")

    def _failed(self, ev: events.Event, target: str, why: str) -> None:
        events.note_action(self.ledger, ev.job, "notify-failed", why, state=ev.dst)
        count_notify_failure(self.ledger.r, self.ledger.keys, target, ev.dst)
