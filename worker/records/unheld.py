"""Acting on a job that no live runner holds (its per-job lock is absent), each check and write
done atomically inside Redis, so a runner that claims or renews at the same moment either wins
before the check or finds the job changed after it.

- `cancel_unheld`: a job that holds no session (QUEUED, or ALLOCATING with no endpoint recorded
  by its owner or its watchdog) and whose lock is absent ends CANCELLED at once, whatever its
  owner field says (a claimant that died, or a claim that never ran). A job that may hold a
  session is left to its runner, its watchdog or the janitor's adopter, which see the flag.
- `clear_dead_claim`: a QUEUED job whose claimant is gone (owner set, lock absent) gets its owner
  cleared, so that a worker can claim it again (the janitor then sends its message again).
- `note_reason`: the owner rewrites the reason of the state the job is in (a retained VM whose
  recovery keeps failing says so on the job, pass after pass).

The transition itself stays `Ledger.transition`'s (the one state writer); these scripts only
decide, under the lock's absence, who may make it.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from worker.states import JobState

if TYPE_CHECKING:
    from worker.records.ledger import Ledger

# How long a canceller holds the job's lock while it ends the job (two round trips).
CANCEL_LOCK_MS = 10_000

# KEYS: lock, job hash, watch hash. ARGV: canceller token, lock ttl ms.
# If no lock is held, the job is queued or allocating, and no endpoint was ever recorded for it:
# take the lock and the ownership for the canceller (no claim can start meanwhile). 1 if taken.
_TAKE_TO_CANCEL = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local st = redis.call('HGET', KEYS[2], 'state')
if st ~= 'queued' and st ~= 'allocating' then return 0 end
local ep = redis.call('HGET', KEYS[2], 'endpoint')
if ep and ep ~= '' then return 0 end
local wep = redis.call('HGET', KEYS[3], 'endpoint')
if wep and wep ~= '' then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('HSET', KEYS[2], 'owner', ARGV[1])
return 1
"""

# KEYS: lock, job hash. ARGV: the claimant the caller saw, now. Clears a dead claim: 1 if done.
_CLEAR_DEAD_CLAIM = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if redis.call('HGET', KEYS[2], 'state') ~= 'queued' then return 0 end
local cur = redis.call('HGET', KEYS[2], 'owner')
if (not cur) or cur == '' or cur ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[2], 'owner', '', 'updated_at', ARGV[2])
return 1
"""

# KEYS: job hash. ARGV: owner, state, reason, now. 1 if the owner still holds the job in it.
_NOTE_REASON = """
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'state') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'reason', ARGV[3], 'updated_at', ARGV[4])
return 1
"""


def cancel_unheld(ledger: Ledger, job_id: str, reason: str) -> bool:
    """End `job_id` CANCELLED now if no live runner holds it and it holds no session. True if
    it ended now; False if it is left to whoever holds (or adopts) it."""
    from worker.errors import IllegalTransition, StaleOwner
    from worker.records.ownership import release_bare_lock

    k = ledger.keys
    token = f"cancel-{secrets.token_hex(8)}"
    taken = ledger.r.eval(
        _TAKE_TO_CANCEL, 3, k.lock(job_id), k.job(job_id), k.watch(job_id), token, CANCEL_LOCK_MS
    )
    if not int(taken):
        return False
    try:
        ledger.transition(job_id, JobState.CANCELLED, owner=token, reason=reason)
    except (StaleOwner, IllegalTransition):
        return False
    finally:
        release_bare_lock(ledger, job_id, token)  # it took no lease: nothing shared to clear
    return True


def clear_dead_claim(ledger: Ledger, job_id: str, claimant: str) -> bool:
    """Clear the owner of a QUEUED job whose claimant `claimant` holds no lock any more."""
    k = ledger.keys
    now = repr(ledger.clock.time())
    return bool(
        int(ledger.r.eval(_CLEAR_DEAD_CLAIM, 2, k.lock(job_id), k.job(job_id), claimant, now))
    )


def note_reason(ledger: Ledger, job_id: str, owner: str, state: JobState, reason: str) -> bool:
    """As the job's owner, say why it is still in `state` (no transition, no history entry)."""
    now = repr(ledger.clock.time())
    args = (owner, state.value, reason, now)
    return bool(int(ledger.r.eval(_NOTE_REASON, 1, ledger.keys.job(job_id), *args)))
