"""What `colabq logs -f` says on stderr while its job waits in a queue, so that waiting is never
silent: which queue(s) it waits on and how many live workers serve them; with none, that nothing
will take it until a worker for its GPU starts, and how to start one; and when it leaves the
queue. The job's own output goes to stdout, untouched; the log loop is `producer.follow`'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from worker.states import JobState

if TYPE_CHECKING:
    from worker.records.ledger import Ledger

CHECK_EVERY_S = 5.0  # how often the live workers are counted again while the job waits


def waiting_line(job_id: str, served: Sequence[tuple[str, str, int]]) -> str:
    """One line for a queued job; `served` is (GPU type, its queue, live workers consuming it),
    in the job's order of preference."""
    if not any(n for _, _, n in served):
        queues = " or ".join(q for _, q, _ in served)
        return (
            f"colabq: job {job_id} is queued and no live worker serves {queues}: it waits until "
            f"one starts (`colabq worker --gpu {served[0][0]}` on a worker host; `colabq workers` "
            "lists the live ones)"
        )
    waits = " or ".join(f"{q} ({n} live)" for _, q, n in served)
    return f"colabq: job {job_id} is queued: waiting for a worker serving {waits}"


class WaitNotices:
    """Called with the job's state at each turn of the follow loop: says `waiting_line` when the
    job is first seen queued and whenever the count changes (counted at most every
    `CHECK_EVERY_S`), and one line when it leaves the queue."""

    def __init__(
        self,
        ledger: Ledger,
        job_id: str,
        queue_for: Callable[[str], str],
        say: Callable[[str], None],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ledger, self.job_id, self.queue_for, self.say = ledger, job_id, queue_for, say
        self.clock = clock
        self._checked_at: float | None = None
        self._said: str | None = None
        self._left = False

    def __call__(self, state: JobState) -> None:
        if state is JobState.QUEUED:
            now = self.clock()
            if self._checked_at is not None and now - self._checked_at < CHECK_EVERY_S:
                return
            self._checked_at = now
            line = waiting_line(self.job_id, self._served())
            if line != self._said:
                self.say(line)
                self._said = line
        elif self._said is not None and not self._left:
            self._left = True
            self.say(f"colabq: job {self.job_id} left the queue ({state.name}); following it")

    def _served(self) -> list[tuple[str, str, int]]:
        from worker.records.fleet import count_serving

        spec = self.ledger.get(self.job_id).spec
        # Its fallback types too, where the spec has them (`--gpu A100,L4`).
        gpus = [spec.gpu.value, *(g.value for g in getattr(spec, "gpu_fallback", ()))]
        out = []
        for gpu in gpus:
            queue = self.queue_for(gpu)
            out.append((gpu, queue, count_serving(self.ledger.r, self.ledger.keys, queue)))
        return out
