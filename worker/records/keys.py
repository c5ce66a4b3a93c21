"""Every Redis key name colabq uses, built in this one module.

All keys start with the deployment's prefix (`Settings.key_prefix`). Values never hold a secret.
"""

from __future__ import annotations

from dataclasses import dataclass


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
