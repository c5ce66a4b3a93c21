"""Every Redis key name colabq uses, built in this one module.

All keys start with the deployment's prefix (`Settings.key_prefix`). Values never hold a secret.
"""

from __future__ import annotations

from dataclasses import dataclass

# kombu's Redis transport keeps a queue's priorities in lists named queue + sep + priority.
_PRIORITY_SEP = "\x06\x16"
_PRIORITY_STEPS = (0, 3, 6, 9)


def queue_lists(queue: str) -> tuple[str, ...]:
    """The lists that hold a Celery queue's messages (kombu's, outside the key prefix): the
    queue's own name for the default priority, one more per priority step."""
    return tuple(queue if p == 0 else f"{queue}{_PRIORITY_SEP}{p}" for p in _PRIORITY_STEPS)


@dataclass(frozen=True)
class Keys:
    prefix: str = "colabq"

    def job(self, job_id: str) -> str:
        """Hash: the job record (spec JSON, state, owner, session, endpoint, outcome...)."""
        return f"{self.prefix}:job:{job_id}"

    def history(self, job_id: str) -> str:
        """List of JSON entries {state, at, reason, actor, host[, action]}: every transition
        (and every action on the job, such as a cancel request), oldest first."""
        return f"{self.prefix}:job:{job_id}:history"

    def log(self, job_id: str) -> str:
        """Capped stream of the job's output lines."""
        return f"{self.prefix}:job:{job_id}:log"

    def watch(self, job_id: str) -> str:
        """Hash: what the job's watchdog observed (endpoint seen, stop reason, verified)."""
        return f"{self.prefix}:job:{job_id}:watch"

    def cancel(self, job_id: str) -> str:
        """Flag set by `colabq cancel`, polled by the runner."""
        return f"{self.prefix}:job:{job_id}:cancel"

    def lock(self, job_id: str) -> str:
        """Per-job lock holding the owner token; its TTL is the lease (invariant 6)."""
        return f"{self.prefix}:job:{job_id}:lock"

    def jobs(self) -> str:
        """Sorted set of job ids by submission time."""
        return f"{self.prefix}:jobs"

    def idempotency(self, key: str, owner: str | None = None) -> str:
        """String: the job id first submitted under this idempotency key (invariant 8); an
        owned job's (`worker.people`) apart for each owner, so that one user's key never names
        another's job. Written by the gate alone (`worker.gate`), never in a user's namespace."""
        if owner:
            return f"{self.prefix}:idem.{owner}:{key}"
        return f"{self.prefix}:idem:{key}"

    def leases(self) -> str:
        """Sorted set job id -> lease expiry (epoch seconds), for the janitor."""
        return f"{self.prefix}:leases"

    def active(self) -> str:
        """Set of the ids of jobs not yet terminal: what a janitor pass reads."""
        return f"{self.prefix}:active"

    def endpoints(self) -> str:
        """Hash endpoint -> job id, for every endpoint a job was assigned (account
        reconciliation tells colabq's sessions from everybody else's by it)."""
        return f"{self.prefix}:endpoints"

    def live_destinations(self) -> str:
        """Hash destination (`spec.destination`) -> the id of the live job writing there; a
        second live job with the same one is refused at submit unless explicitly allowed."""
        return f"{self.prefix}:live-destinations"

    def first_seen(self, account: str = "") -> str:
        """Hash endpoint -> when a janitor pass first saw it on `account` (epoch s); each
        account's passes keep their own (a pass forgets what its account no longer lists)."""
        return f"{self.prefix}:janitor:first-seen" + (f":{account}" if account else "")

    def tracker_check(self) -> str:
        """Sorted set job id -> when it ended, for ended jobs whose tracker run colabq opened:
        the janitor asks the tracker whether each run was closed, and finishes it if not."""
        return f"{self.prefix}:janitor:tracker-check"

    def reconcile_cursor(self) -> str:
        """String: where the janitor's walk over the job records stopped (a SCAN cursor)."""
        return f"{self.prefix}:janitor:reconcile-cursor"

    def adopting(self, job_id: str) -> str:
        """Set-if-absent with expiry: a janitor started an adopter for this job."""
        return f"{self.prefix}:job:{job_id}:adopting"

    def deferred(self) -> str:
        """Sorted set job id -> when its next try is due: QUEUED jobs waiting for a GPU."""
        return f"{self.prefix}:deferred"

    def worker_health(self, worker: str) -> str:
        """String (JSON): a drained worker's state, reason and next probe (`fleet.health`)."""
        return f"{self.prefix}:worker:{worker}:health"

    def worker_recent_failures(self, worker: str) -> str:
        """String with a TTL: the host failures in a row of a worker its probe undrained a
        while ago (a host that breaks again soon backs off from where it was)."""
        return f"{self.prefix}:worker:{worker}:recent-failures"

    def janitor_lock(self, account: str = "") -> str:
        """One janitor pass at a time per Colab account (`worker.janitor`)."""
        return f"{self.prefix}:janitor:lock" + (f":{account}" if account else "")

    def janitor_passes(self) -> str:
        """Hash account -> when its last janitor pass started (epoch s): a worker host runs its
        account's duty when no pass of that account ran lately (`worker.janitor.duty`)."""
        return f"{self.prefix}:janitor:passes"

    def account_usage(self) -> str:
        """Hash account -> JSON: the last `colab usage` a host of that account saw, and when
        (`worker.accounts.balances`, `colabq usage`)."""
        return f"{self.prefix}:accounts:usage"

    def worker_card(self, worker: str) -> str:
        """String (JSON, with a TTL): what a live worker says of itself (`fleet.py`)."""
        return f"{self.prefix}:worker:{worker}"

    def workers(self) -> str:
        """Sorted set worker name -> when its card expires."""
        return f"{self.prefix}:workers"

    def requests(self, user: str) -> str:
        """Stream: the requests of Redis user `user` to the gate (`worker.gate`): with its
        replies, the only keys a user's ACL rule lets them write (`<prefix>:u:<user>:*`)."""
        return f"{self.prefix}:u:{user}:requests"

    def requests_user(self, key: str) -> str | None:
        """The user whose `requests` stream `key` is (the name in the key), else None."""
        head, tail = f"{self.prefix}:u:", ":requests"
        if not (key.startswith(head) and key.endswith(tail)):
            return None
        return key[len(head) : -len(tail)] or None

    def reply(self, user: str, request_id: str) -> str:
        """List with an expiry: the gate's answer to one request of `user` (the client pops it)."""
        return f"{self.prefix}:u:{user}:reply:{request_id}"

    def gate_lease(self) -> str:
        """String with a TTL: the consumer name of the gate that serves requests now."""
        return f"{self.prefix}:gate:lease"

    def queue_workers(self, queue: str) -> str:
        """Sorted set worker name -> when its card expires, for the workers consuming `queue`."""
        return f"{self.prefix}:queue:{queue}:workers"

    def metrics_ended(self) -> str:
        """Hash: what the ended jobs add up to (`worker.metrics.ended`): jobs by final state,
        GPU, account and user, their GPU-seconds held and compute units, the wait and run
        histograms' buckets. Written in each job's terminal transition, never scanned."""
        return f"{self.prefix}:metrics:ended"

    def metrics_janitor(self) -> str:
        """Hash `<account>|<action>` -> how many of that action janitor passes took (orphans
        stopped, jobs adopted or settled, ghost runs closed; `worker.metrics.counts`)."""
        return f"{self.prefix}:metrics:janitor"

    def metrics_notify(self) -> str:
        """Hash `<target>|<state>` -> notifications the notifier gave up on."""
        return f"{self.prefix}:metrics:notify"

    # --- quotas (`worker.quota`): service and operator keys, which a user's ACL rule may read
    # and never write (`worker.people.acl`).

    def quota_limits(self) -> str:
        """Hash `<kind>|<name>|<limit>` -> the limit an operator set (kind user or account;
        limit gpus, units_day, units_week or units_month)."""
        return f"{self.prefix}:quota:limits"

    def quota_running(self, kind: str, name: str) -> str:
        """Set: the jobs of a user (or account) that hold a quota slot, from their claim to
        their end or put-back."""
        return f"{self.prefix}:quota:running:{kind}:{name}"

    def quota_waiting(self, kind: str, name: str) -> str:
        """Sorted set job id -> its submission time: the jobs a user's (or account's) quota
        keeps waiting, the first made due when one of its slots frees."""
        return f"{self.prefix}:quota:waiting:{kind}:{name}"

    def quota_spent(self, period: str, period_id: str) -> str:
        """Hash `<kind>|<name>` -> the compute units of the jobs that ended in that period
        (`day`, `week`, `month`; its id in the deployment's time zone), expiring after it."""
        return f"{self.prefix}:quota:spent:{period}:{period_id}"

    def quota_ended(self) -> str:
        """Sorted set (JSON of job, user, account, held_s, units) -> when it ended: the last
        two days' endings, for the burn rates of `colabq budget`."""
        return f"{self.prefix}:quota:ended"
