"""Who may act for a job: the per-job lock, the record's owner field and the leases index.

Owns every change of ownership after creation: `claim` (the plain claim; the first claim of a
QUEUED job with its ALLOCATING transition is `claim.py`'s), the heartbeat's `renew`, `adopt` (a
job whose lease expired), `take_over` (a job whose owner is provably dead), `restore` (the
owner writes back a record Redis lost), the release of a lock by its holder, the janitor's
one-pass-at-a-time lock, the gate's one-gate-at-a-time lease (`worker.gate`) and the expired
leases the janitor scans. Functions over the `Ledger`,
which keeps a thin method for each; state changes stay `Ledger.transition`'s, acting on a job
no runner holds is `unheld.py`'s, and the heartbeat thread and its fence are `lease.py`'s.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

from worker.people.owners import owner_of
from worker.records import events, ids
from worker.records.record import MAY_HOLD, check_fields
from worker.records.txn import watched
from worker.spec import JobSpec, destination, encode_spec
from worker.states import TERMINAL, JobState

if TYPE_CHECKING:
    from worker.records.ledger import Ledger

# Renew a lease: extend the lock if we hold it; take it back if it expired (an outage longer
# than the lease) while the job still names us its owner. Anything else means we lost it.
# KEYS: lock, job hash, leases zset. ARGV: owner, ttl ms, lease expiry (epoch s), job id.
_RENEW = """
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
elseif (not cur) and redis.call('HGET', KEYS[2], 'owner') == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
elseif (not cur) and redis.call('EXISTS', KEYS[2]) == 0 then
  return 2
else
  return 0
end
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4])
return 1
"""

# Take over a job from an owner known to be dead (its process is gone from this host): the
# lock, if it is free or still that owner's, and the ownership. KEYS: lock, job hash, leases.
# ARGV: old owner, new owner, ttl ms, lease expiry, job id.
_TAKE_OVER = """
if redis.call('HGET', KEYS[2], 'owner') ~= ARGV[1] then return 0 end
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('HSET', KEYS[2], 'owner', ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[5])
return 1
"""


class Renewal(enum.IntEnum):
    """What a lease renewal found."""

    LOST = 0  # another owner holds the job
    RENEWED = 1
    RECORD_GONE = 2  # no lock and no record: Redis lost the job's keys


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


def claim(ledger: Ledger, job_id: str, owner: str, ttl_s: float) -> bool:
    """Take the per-job lock and become the owner of an unowned job. False if another
    runner holds it or owned it (invariant 6: at most one live session per job)."""
    k = ledger.keys
    if not ledger.r.set(k.lock(job_id), owner, nx=True, px=_ms(ttl_s)):
        return False
    key = k.job(job_id)

    def txn(pipe: Any) -> bool:
        cur = pipe.hget(key, "owner")
        if cur is None or cur.decode() not in ("", owner):
            return False
        pipe.multi()
        pipe.hset(key, "owner", owner)
        pipe.zadd(k.leases(), {job_id: ledger.clock.time() + ttl_s})
        return True

    ok = watched(ledger.r, txn, key)
    if not ok:
        release_lock(ledger, job_id, owner)
    return ok


def renew(ledger: Ledger, job_id: str, owner: str, ttl_s: float) -> Renewal:
    """Heartbeat: extend the lease if we still hold it (or take back a lock that expired
    during an outage while the job still names us)."""
    k = ledger.keys
    keys = [k.lock(job_id), k.job(job_id), k.leases()]
    args = [owner, _ms(ttl_s), ledger.clock.time() + ttl_s, job_id]
    return Renewal(int(ledger.r.eval(_RENEW, len(keys), *keys, *args)))


def adopt(ledger: Ledger, job_id: str, new_owner: str, ttl_s: float) -> bool:
    """Take a job whose owner died: its lock (free, since the lease expired) and its
    ownership. False if someone holds the lock (the owner came back, or another adopter)."""
    k = ledger.keys
    if not ledger.r.set(k.lock(job_id), new_owner, nx=True, px=_ms(ttl_s)):
        return False
    pipe = ledger.r.pipeline(transaction=True)
    pipe.hset(k.job(job_id), "owner", new_owner)
    pipe.zadd(k.leases(), {job_id: ledger.clock.time() + ttl_s})
    pipe.execute()
    return True


def take_over(ledger: Ledger, job_id: str, old_owner: str, new_owner: str, ttl_s: float) -> bool:
    """Become the owner of a job whose owner is provably dead (not just silent)."""
    k = ledger.keys
    keys = [k.lock(job_id), k.job(job_id), k.leases()]
    args = [old_owner, new_owner, _ms(ttl_s), ledger.clock.time() + ttl_s, job_id]
    return bool(ledger.r.eval(_TAKE_OVER, len(keys), *keys, *args))


def restore(
    ledger: Ledger,
    spec: JobSpec,
    owner: str,
    state: JobState,
    ttl_s: float,
    *,
    held_since: float | None = None,
    **fields: str,
) -> bool:
    """Write again the record of a job that Redis lost (restarted without persistence)
    while its owner lives, from what the owner holds: spec, state, owner, lease, the
    indexes, and the held-time clock from `held_since` (when the owner recorded the
    session's endpoint; the held time of earlier segments is lost with the record).
    False if a record exists (then nothing is written)."""
    check_fields(fields)
    key, k = ledger.keys.job(spec.job_id), ledger.keys
    now = ledger.clock.time()
    created = spec.submitted_at.timestamp()
    reason = "record restored by its owner: Redis lost it (restarted without persistence)"

    def txn(pipe: Any) -> bool:
        if pipe.exists(key):
            return False
        pipe.multi()
        pipe.hset(
            key,
            mapping={"spec": encode_spec(spec), "state": state.value, "owner": owner,
                     "reason": reason, "created_at": repr(created),
                     "updated_at": repr(now), **fields},
        )  # fmt: skip
        entry = ledger.entry(state, now, reason)
        pipe.rpush(k.history(spec.job_id), entry)
        events.append(pipe, k, ledger.retention_s, spec.job_id, events.STATE, "", entry)
        pipe.zadd(k.jobs(), {spec.job_id: created})
        if state not in TERMINAL:
            pipe.sadd(k.active(), spec.job_id)
            pipe.hset(k.live_destinations(), destination(spec), spec.job_id)
        pipe.set(k.idempotency(spec.idempotency_key, owner_of(spec.job_id)), spec.job_id)
        pipe.set(k.lock(spec.job_id), owner, px=_ms(ttl_s))
        pipe.zadd(k.leases(), {spec.job_id: now + ttl_s})
        if fields.get("endpoint"):
            pipe.hset(k.endpoints(), fields["endpoint"], spec.job_id)
            if held_since is not None and state in MAY_HOLD:
                pipe.hset(key, "held_since", repr(min(held_since, now)))
        return True

    return watched(ledger.r, txn, key)


def release_lock(ledger: Ledger, job_id: str, owner: str) -> None:
    """Give up the job's lock and lease, if `owner` still holds them."""
    _delete_if_holder(ledger, ledger.keys.lock(job_id), owner, also=job_id)


def release_bare_lock(ledger: Ledger, job_id: str, owner: str) -> None:
    """Give up a job's lock taken without a lease (a canceller's, the gate's): only the job's
    own key is written, no shared index."""
    _delete_if_holder(ledger, ledger.keys.lock(job_id), owner)


def expired_leases(ledger: Ledger, now: float) -> list[str]:
    """Jobs whose owner stopped renewing its lease before `now`."""
    key = ledger.keys.leases()
    return ids.members("job id", ledger.r.zrangebyscore(key, "-inf", now), key)


def drop_lease(ledger: Ledger, job_id: str) -> None:
    ledger.r.zrem(ledger.keys.leases(), job_id)


def try_janitor_lock(ledger: Ledger, token: str, ttl_s: float, account: str = "") -> bool:
    """One janitor pass at a time per Colab account, whatever runs beat or the account's
    duty (set-if-absent with expiry)."""
    key = ledger.keys.janitor_lock(account)
    return bool(ledger.r.set(key, token, nx=True, px=_ms(ttl_s)))


def release_janitor_lock(ledger: Ledger, token: str, account: str = "") -> None:
    _delete_if_holder(ledger, ledger.keys.janitor_lock(account), token)


# KEYS: the gate's lease. ARGV: this gate's name, ttl ms. Takes a free lease or renews its own.
_HOLD_GATE = """
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""


def hold_gate_lease(ledger: Ledger, token: str, ttl_s: float) -> bool:
    """Take the gate's lease if no gate holds it, or renew it if `token` does (`worker.gate`:
    one gate serves requests at a time)."""
    key = ledger.keys.gate_lease()
    return bool(ledger.r.eval(_HOLD_GATE, 1, key, token, _ms(ttl_s)))


def release_gate_lease(ledger: Ledger, token: str) -> None:
    _delete_if_holder(ledger, ledger.keys.gate_lease(), token)


def _delete_if_holder(ledger: Ledger, key: str, token: str, *, also: str | None = None) -> None:
    """Delete a lock only if `token` still holds it (checked and deleted atomically), and with
    it the lease of job `also`."""

    def txn(pipe: Any) -> None:
        cur = pipe.get(key)
        pipe.multi()
        if cur is not None and cur.decode() == token:
            pipe.delete(key)
            if also is not None:
                pipe.zrem(ledger.keys.leases(), also)

    watched(ledger.r, txn, key)
