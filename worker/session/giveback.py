"""The runner gives a job back: a host failure or a capacity refusal met before any GPU is held.

The job goes back to QUEUED untouched, as this owner, with the attempt in its record and
history (`fleet.putback`). Capacity: the next try is planned with capped backoff
(`fleet.capacity`), or the job ends FAILED_NO_GPU once its capacity wait is over. Host: a job
that several different workers gave back for their own failures is poison and ends FAILED with
every reason. Sending the message again and draining the worker are the task's
(`worker.tasks`): the runner only records.
"""

from __future__ import annotations

import json

from worker.fleet.capacity import plan_wait, waiting_line
from worker.fleet.causes import Cause, PutBack
from worker.fleet.putback import Attempt, give_back_host, put_back
from worker.session.finish import Finishing
from worker.session.job import Outcome
from worker.session.watchpolicy import Phase
from worker.states import JobState as S


class GivingBack(Finishing):
    def _put_back(self, p: PutBack) -> Outcome:
        d, now = self.d, self.d.clock.time()
        if self.restarts > 0:
            # A restart segment keeps its place (its restarts, its checkpoint): it ends as
            # before rather than start again from the first segment.
            state = S.FAILED_NO_GPU if p.cause is Cause.CAPACITY else S.FAILED
            return self._end_now(state, f"restart {self.segment}: {p.cause} failure: {p.reason}")
        self._phase(Phase.DONE)  # this owner's attempt is over; its watchdog exits
        attempt = Attempt(now, d.worker_name, p.cause, p.reason)
        rec = d.ledger.get(self.job_id)
        if p.cause is Cause.CAPACITY:
            since = rec.get("capacity_since")
            plan = plan_wait(
                gpus=p.reason, refusals_before=int(rec.get("capacity_refusals") or 0),
                since=float(since) if since else None, now=now,
                wait_s=self.spec.capacity_wait_s, base_s=d.settings.capacity_backoff_s,
                cap_s=d.settings.capacity_backoff_max_s,
            )  # fmt: skip
            if plan.retry_at is None:
                return self._end_now(S.FAILED_NO_GPU, plan.reason)
            put_back(
                d.ledger, self.job_id, self.owner, attempt, plan.reason,
                retry_at=plan.retry_at, refusals=plan.refusals, capacity_since=plan.since,
                released=p.released,
            )  # fmt: skip
            self.log(waiting_line(plan.reason, plan.retry_at, now))
            reason = plan.reason
        else:
            state, reason = give_back_host(
                d.ledger, self.job_id, self.owner, attempt, d.settings.poison_hosts,
                released=p.released,
            )  # fmt: skip
            self.log(reason if state is S.FAILED else f"{reason}; the job goes back to the queue")
            if state is S.FAILED:
                self._ship.close()
                return Outcome(state, reason, put_back=p.cause.value)
        self._ship.close()
        return Outcome(S.QUEUED, reason, put_back=p.cause.value)

    def _end_now(self, state: S, reason: str) -> Outcome:
        """End a job that holds no session at once (its capacity wait is over)."""
        self._to(state, reason, report=json.dumps(self._report(state, reason)), outcome=state.value)
        self._ship.close()
        return Outcome(state, reason, put_back=Cause.CAPACITY.value)
