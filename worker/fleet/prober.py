"""A GPU worker's fleet duties, from a thread of its main process (never a pool slot):

- every tick it sends the jobs whose capacity wait is due (`putback.promote_due`: each due job
  is taken by exactly one worker);
- while the worker is drained it keeps its GPU queues' consumers cancelled, and, for an
  automatic drain, probes the host's health when the next probe is due (the same checks a
  worker passes to start: `checks.worker_host_problem`): healthy, it lifts the drain and takes
  jobs again; still broken, the next probe backs off. A manual drain waits for `undrain`;
- a job whose owner died under the worker (its pool process killed: Celery replaces the
  process, not the job) is taken back: an adoption sent to the worker's own queue, as a
  restarted worker does for its own jobs;
- its account's janitor duty (`worker.janitor.duty`) is started when due.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

import redis
from celery import Celery

from worker.errors import ColabqError
from worker.fleet import health
from worker.fleet.dispatch import resume_consuming, send_job, stop_consuming
from worker.fleet.putback import promote_due
from worker.flow.deps import release_or_settle
from worker.records.ledger import Ledger
from worker.settings import Settings

log = logging.getLogger(__name__)

Probe = Callable[[Settings], str | None]
# A job whose owner died under this worker is taken back again after this long, if still there;
# the state dir is looked at this often.
ADOPT_AGAIN_S = 60.0
SCAN_S = 3.0


class Prober:
    def __init__(
        self,
        app: Celery,
        settings: Settings,
        ledger: Ledger,
        name: str,
        queues: Sequence[str],
        probe: Probe,
        tick_s: float = 1.0,
        orphans: Callable[[], list[str]] = list,
        adopt: Callable[[str], None] = lambda job_id: None,
        duty: Callable[[float], object] = lambda now: None,
    ) -> None:
        self.app, self.settings, self.ledger, self.name = app, settings, ledger, name
        self.queues, self.probe, self.tick_s = tuple(queues), probe, tick_s
        self.orphans, self.adopt, self.duty = orphans, adopt, duty
        self.adopted: dict[str, float] = {}
        self.scanned_at = float("-inf")
        self.consuming = True
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="colabq-prober", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick(time.time())
            except (redis.RedisError, ColabqError, OSError):
                pass  # Redis or this host, for a moment: the next tick tries again
            except Exception as exc:  # anything else: said, and the worker's duties go on
                log.error("colabq worker %s: a fleet tick failed: %s", self.name, exc,
                          exc_info=True)  # fmt: skip
            self._stop.wait(self.tick_s)

    def tick(self, now: float) -> None:
        self.send_due(now)
        self.take_back(now)
        self.duty(now)
        h = health.read(self.ledger.r, self.ledger.keys, self.name)
        if h is None:
            if not self.consuming:
                self._resume("drain lifted")
            return
        if self.consuming:
            stop_consuming(self.app, self.name, self.queues)
            self.consuming = False
        if h.manual or now < h.next_probe_at:
            return
        problem = self.probe(self.settings)
        if problem is None:
            remember = 2 * self.settings.drain_probe_max_s
            health.undrain(self.ledger.r, self.ledger.keys, self.name, remember_s=remember)
            self._resume(f"healthy again after {h.failures} failure(s)")
        else:
            health.note_failure(
                self.ledger.r, self.ledger.keys, self.name, problem, now,
                probe_s=self.settings.drain_probe_s, probe_max_s=self.settings.drain_probe_max_s,
            )  # fmt: skip

    def take_back(self, now: float) -> list[str]:
        """Adopt the jobs whose owner died under this worker (once a minute at most each)."""
        sent: list[str] = []
        if now - self.scanned_at < SCAN_S:
            return sent
        self.scanned_at = now
        for job_id in self.orphans():
            if now - self.adopted.get(job_id, float("-inf")) < ADOPT_AGAIN_S:
                continue
            self.adopted[job_id] = now
            self.adopt(job_id)
            sent.append(job_id)
            print(f"colabq worker {self.name}: taking back job {job_id} (its owner died)",
                  flush=True)  # fmt: skip
        return sent

    def send_due(self, now: float) -> list[str]:
        sent = []
        for job_id in promote_due(self.ledger, now):
            try:
                if not release_or_settle(self.ledger, job_id, now):
                    continue  # waits for its dependencies, or ended (`worker.flow.deps`)
                spec = self.ledger.get(job_id).spec
            except ColabqError:
                continue
            except (ValueError, KeyError, TypeError) as exc:  # this job's records alone
                log.warning("colabq worker %s: due job %s not sent: %s", self.name, job_id, exc)
                continue
            send_job(self.app, spec, self.settings.queue_prefix)
            sent.append(job_id)
        return sent

    def _resume(self, why: str) -> None:
        resume_consuming(self.app, self.name, self.queues)
        self.consuming = True
        print(f"colabq worker {self.name}: taking jobs again ({why})", flush=True)
