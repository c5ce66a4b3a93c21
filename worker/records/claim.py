"""A worker's claim of a QUEUED job, with the job's first state change, in one Redis script.

What used to take a dozen round trips (the job's state, the lock, the owner, the lease, the
segment's reset, the ALLOCATING transition and its history entry) is one script, so a message
reaches ALLOCATING about as fast as a plain Celery task starts (P4). It refuses, writing
nothing, a job that is not QUEUED, whose capacity wait is not over, that another runner owns or
holds the lock of, or a claim by a drained worker. The worker's own setup comes first: a job is
owned only once it succeeded (`worker.tasks`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from worker.flow.deps import WAIT_DEPS
from worker.flow.slots import SWEEP_BASE, TAKE_SLOT, TOOK_SLOT
from worker.people.owners import owner_of
from worker.quota.claim import TAKE_QUOTA, TOOK_QUOTA, quota_claim_args
from worker.records.events import events_key
from worker.records.ledger import Ledger
from worker.states import JobState

# KEYS: job hash, lock, leases, watch hash, history, the worker's health, events. ARGV: owner,
# lease ms, lease expiry, job id, now, worker, owner host, nonce, wall deadline, reason, history
# entry, the message's spec ('' for a job without an owner: not compared), the key prefix (a
# sweep's cap, `worker.flow.slots`); KEYS[8]: deferred. From KEYS[9] and ARGV[14]: the quotas'
# (`worker.quota.claim`).
_CLAIM = (
    SWEEP_BASE
    + """
local id, now, pfx, job, deferred = ARGV[4], ARGV[5], ARGV[13], KEYS[1], KEYS[8]
local st = redis.call('HGET', KEYS[1], 'state')
if not st then return {'missing', ''} end
if ARGV[12] ~= '' and redis.call('HGET', KEYS[1], 'spec') ~= ARGV[12] then
  return {'forged', ''}
end
if st ~= 'queued' then return {'not_queued', st} end
local retry = redis.call('HGET', KEYS[1], 'retry_at')
if retry and tonumber(retry) > tonumber(ARGV[5]) then return {'waiting', retry} end
if redis.call('EXISTS', KEYS[6]) == 1 then return {'drained', ''} end
local cur = redis.call('HGET', KEYS[1], 'owner') or ''
if cur ~= '' and cur ~= ARGV[1] then return {'owned', ''} end
"""
    + WAIT_DEPS
    + TAKE_SLOT
    + TAKE_QUOTA
    + """
if not redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {'owned', ''} end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'owner_host', ARGV[7], 'state', 'allocating',
           'reason', ARGV[10], 'updated_at', ARGV[5], 'claimed_at', ARGV[5], 'worker', ARGV[6],
           'wall_deadline_at', ARGV[9], 'nonce', ARGV[8], 'segment', '0', 'restarts', '0')
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4])
"""
    + TOOK_SLOT
    + TOOK_QUOTA
    + """
for _, f in ipairs(redis.call('HKEYS', KEYS[4])) do
  if string.sub(f, 1, 5) == 'exec_' then redis.call('HDEL', KEYS[4], f) end
end
redis.call('HSET', KEYS[4], 'segment', '0', 'log_offset', '0')
redis.call('RPUSH', KEYS[5], ARGV[11])
redis.call('XADD', KEYS[7], '*', 'job', ARGV[4], 'kind', 'state', 'from', 'queued', 'e', ARGV[11])
return {'claimed', ''}
"""
)


class Claim(StrEnum):
    CLAIMED = "claimed"
    MISSING = "missing"  # no record
    NOT_QUEUED = "not_queued"  # `detail` is its state
    WAITING = "waiting"  # for a GPU: `detail` is its next try
    DRAINED = "drained"  # this worker takes no job
    OWNED = "owned"  # another runner owns it or holds its lock
    # An owned job's message whose spec is not its record's: sent by someone else than its
    # owner (a user may push to the GPU queues; only the owner may write the record).
    FORGED = "forged"


@dataclass(frozen=True)
class ClaimResult:
    claim: Claim
    detail: str = ""

    @property
    def state(self) -> JobState | None:
        return JobState(self.detail) if self.claim is Claim.NOT_QUEUED else None


def claim_and_start(
    ledger: Ledger,
    job_id: str,
    owner: str,
    *,
    ttl_s: float,
    worker: str,
    owner_host: str,
    nonce: str,
    wall_deadline_at: float,
    payload: str = "",
    account: str = "",
) -> ClaimResult:
    """Claim `job_id` for `owner` and move it to ALLOCATING (see the module's docstring). For
    a job with an owner (`worker.people`), `payload` (the message's spec) must be the
    record's, byte for byte. `account` is the claiming worker's Colab account (its quota)."""
    k, now = ledger.keys, ledger.clock.time()
    reason = f"claimed by {worker}"
    entry = ledger.entry(JobState.ALLOCATING, now, reason)
    keys = [k.job(job_id), k.lock(job_id), k.leases(), k.watch(job_id), k.history(job_id),
            k.worker_health(worker), events_key(k), k.deferred()]  # fmt: skip
    args = [owner, int(ttl_s * 1000), now + ttl_s, job_id, repr(now), worker, owner_host, nonce,
            repr(wall_deadline_at), reason, entry,
            payload if owner_of(job_id) else "", k.prefix]  # fmt: skip
    quota_keys, quota_args = quota_claim_args(k, account, now, ledger.quota_tz)
    keys, args = keys + quota_keys, args + quota_args
    raw = ledger.r.eval(_CLAIM, len(keys), *keys, *args)
    what, detail = (x.decode() if isinstance(x, bytes) else str(x) for x in raw)
    return ClaimResult(Claim(what), detail)
