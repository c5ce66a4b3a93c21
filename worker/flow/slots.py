"""A sweep's parallel cap (`--max-parallel N`): never more than N of its points running, fleet-wide.

A point runs from its claim on: the claim script (`worker.records.claim`) takes one of the
sweep's slots (its `:running` set) in the same atomic step as the claim, or, when all N are
taken, refuses the claim and defers the point as a capacity wait does: QUEUED, no worker slot
held, a `retry_at` in the deferred set (a backstop, `BACKSTOP_S` away) and a place in the sweep's
`:waiting` queue. A slot is given back when the point ends (`Ledger.transition` to a terminal
state: the runner's end, the janitor's settle, a cancel) or is put back (`fleet.putback`); the
first waiting point in the sweep's order is then made due at once, and the next prober tick
(`fleet.prober`, every second on every live worker) or the janitor sends it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from worker.records import ids

if TYPE_CHECKING:
    from worker.records.keys import Keys

BACKSTOP_S = 30  # a deferred point is tried again this often even if no slot was seen freed

# Lua: `base` := a sweep's base key from the key prefix `pfx` and the sweep's id `sw`, as
# `worker.flow.sweeps.sweep_base` builds it; with the grammar's checks (`worker.records.ids`):
# a job's `sweep` field counts only if it is a sweep id the job may belong to (an owned sweep only
# for a job of the same owner), so a forged field never takes or frees another user's slots, and
# a set's member that is no job id names no key.
SWEEP_BASE = (
    ids.LUA_NAMES
    + """
local function sweep_base(pfx, sw)
  return pfx .. ':sweep:' .. sw
end
"""
)

# Lua, inside the claim script before the lock is taken: `id`, `now`, `pfx`, `job` (the job
# hash) and `deferred` given. Sets `slots` to the sweep's running set when it has a cap, or
# returns the refusal {'waiting', retry_at} when the cap is reached; once claimed, `TOOK_SLOT`.
TAKE_SLOT = """
local slots, queue = nil, nil
local sw = redis.call('HGET', job, 'sweep')
if sw and pfx ~= '' and is_sweep_id(sw, id) then
  local base = sweep_base(pfx, sw)
  local cap = tonumber(redis.call('HGET', base, 'max_parallel') or '0') or 0
  if cap > 0 then
    slots, queue = base .. ':running', base .. ':waiting'
    if redis.call('SISMEMBER', slots, id) == 0 and redis.call('SCARD', slots) >= cap then
      local retry = tostring(tonumber(now) + BACKSTOP)
      redis.call('HSET', job, 'retry_at', retry,
                 'reason', 'waiting: sweep ' .. sw .. ' has ' .. cap .. ' of ' .. cap .. ' running')
      redis.call('ZADD', deferred, retry, id)
      local place = redis.call('ZSCORE', base .. ':jobs', id) or '0'
      redis.call('ZADD', queue, 'NX', place, id)
      return {'waiting', retry}
    end
  end
end
""".replace("BACKSTOP", str(BACKSTOP_S))

TOOK_SLOT = """
if slots then
  redis.call('SADD', slots, id)
  redis.call('ZREM', queue, id)
end
"""

# KEYS: the job hash. ARGV: the key prefix, job id, now, the deferred set (not a declared key,
# written with pcall: only a freed slot writes it, and a write refused would leave the next
# point to its backstop retry; every cancel is the gate's, a service, since issue 26).
# Gives back the job's slot (if it held one) and leaves the sweep's waiting queue; when a slot
# was freed, the first waiting point in the sweep's order that is still QUEUED and unowned is
# made due now. Returns the id made due, or ''.
FREE_SLOT = (
    SWEEP_BASE
    + """
local pfx, id, now = ARGV[1], ARGV[2], ARGV[3]
local sw = redis.call('HGET', KEYS[1], 'sweep')
if not sw or not is_sweep_id(sw, id) then return '' end
local base = sweep_base(pfx, sw)
redis.call('ZREM', base .. ':waiting', id)
if redis.call('SREM', base .. ':running', id) == 0 then return '' end
while true do
  local nxt = redis.call('ZRANGE', base .. ':waiting', 0, 0)[1]
  if not nxt then return '' end
  redis.call('ZREM', base .. ':waiting', nxt)
  local k = pfx .. ':job:' .. nxt
  local st, owner = nil, ''
  if is_job_id(nxt) then
    st, owner = redis.call('HGET', k, 'state'), redis.call('HGET', k, 'owner') or ''
  end
  if st == 'queued' and owner == '' then
    redis.pcall('HSET', k, 'retry_at', now)
    redis.pcall('ZADD', ARGV[4], now, nxt)
    return nxt
  end
end
"""
)


def free_slot(client: Any, keys: Keys, job_id: str, now: float) -> None:
    """Run `FREE_SLOT` for `job_id` on `client` (a Redis client, or a pipeline inside a
    transaction: it then runs atomically with the transaction's other commands)."""
    client.eval(FREE_SLOT, 1, keys.job(job_id), keys.prefix, job_id, repr(now), keys.deferred())
