"""Quotas where a job stops running: its slots given back, and its units added to its user's and
account's sums for the current day, week and month.

`free_quota` runs where a sweep's slot is given back (`Ledger.transition` to any terminal state,
and `fleet.putback`): the job leaves its user's and account's running sets (the ones its claim
recorded on it: `quota_user`, `quota_account`) and their waiting queues; for each slot freed
the first job of that scope's waiting queue still QUEUED and unowned is made due now (the next
prober tick sends it, and the claim decides again). `spend` is queued in the terminal transition
itself, before `free_quota`, so the sums move with the state change: a job's units count in the
period it ends in (the whole job, however long it ran), as its units so far counted while it
ran. It also remembers the ending for two days (`Keys.quota_ended`: `colabq budget`'s rates).

Both write keys a user may not write (`worker.people.acl`) with `redis.pcall`: a user's cancel of
her own job that holds no GPU (the only ending a user's client writes) changes nothing there,
and a slot it could not give back is dropped by the next claim that counts the set.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from worker.quota.limits import job_quota_user
from worker.quota.periods import periods_at
from worker.records.keys import Keys

ENDED_KEPT_S = 2 * 86400
_PERIOD_SLACK_S = 86400  # a period's sums outlive it by a day (a late reader still finds them)

# KEYS: the job hash. ARGV: job id, now, deferred, the running bases (user, account), the
# waiting bases (user, account), the job keys' base. Returns how many slots were freed.
FREE_QUOTA = """
local id, now = ARGV[1], ARGV[2]
local who = {{redis.call('HGET', KEYS[1], 'quota_user') or '', ARGV[4], ARGV[6]},
             {redis.call('HGET', KEYS[1], 'quota_account') or '', ARGV[5], ARGV[7]}}
local freed = 0
for _, w in ipairs(who) do
  if w[1] ~= '' and not string.find(w[1], '[%s|]') then
    redis.pcall('ZREM', w[3] .. w[1], id)
    local gone = redis.pcall('SREM', w[2] .. w[1], id)
    if gone == 1 then
      freed = freed + 1
      while true do
        local nxt = redis.call('ZRANGE', w[3] .. w[1], 0, 0)[1]
        if not nxt then break end
        redis.pcall('ZREM', w[3] .. w[1], nxt)
        local k = ARGV[8] .. nxt
        local st, owner = redis.call('HGET', k, 'state'), redis.call('HGET', k, 'owner') or ''
        if st == 'queued' and owner == '' then
          redis.pcall('HSET', k, 'retry_at', now)
          redis.pcall('ZADD', ARGV[3], now, nxt)
          break
        end
      end
    end
  end
end
return freed
"""

# ARGV: the field for the user ('' none), for the account ('' none), units, then per period
# (day, week, month) its sums' key and their time to live (s); then the endings' key, now, the
# ending (JSON), the oldest ending to keep, the job id and the account's running set: the
# account counts only if its set (which only services write) holds the job.
SPEND = """
local units = tonumber(ARGV[3])
if ARGV[2] ~= '' and redis.call('SISMEMBER', ARGV[15], ARGV[14]) == 0 then ARGV[2] = '' end
for p = 0, 2 do
  local key, ttl = ARGV[4 + 2 * p], ARGV[5 + 2 * p]
  for _, f in ipairs({ARGV[1], ARGV[2]}) do
    if f ~= '' then redis.pcall('HINCRBYFLOAT', key, f, ARGV[3]) end
  end
  redis.pcall('EXPIRE', key, ttl)
end
redis.pcall('ZADD', ARGV[10], ARGV[11], ARGV[12])
redis.pcall('ZREMRANGEBYSCORE', ARGV[10], '-inf', '(' .. ARGV[13])
return 1
"""


def free_quota(client: Any, keys: Keys, job_id: str, now: float) -> None:
    """Run `FREE_QUOTA` for `job_id` on `client` (a Redis client, or a pipeline inside a
    transaction: it then runs atomically with the transaction's other commands)."""
    client.eval(
        FREE_QUOTA, 1, keys.job(job_id), job_id, repr(now), keys.deferred(),
        keys.quota_running("user", ""), keys.quota_running("account", ""),
        keys.quota_waiting("user", ""), keys.quota_waiting("account", ""), keys.job(""),
    )  # fmt: skip


def _text(raw: Mapping[bytes, bytes], name: str) -> str:
    return raw.get(name.encode(), b"").decode(errors="replace")


def spend(
    pipe: Any,
    keys: Keys,
    job_id: str,
    raw: Mapping[bytes, bytes],
    *,
    held_s: float,
    units: float,
    now: float,
    tz_name: str,
) -> None:
    """Queue on `pipe` (the terminal transition's, before `free_quota`) the ending's units for
    its user (its owner under ACLs: the name in its id, which no record field can change) and
    its account (the one its claim recorded, if that account's running set holds it). An
    ending that spent nothing writes nothing."""
    if not units > 0:
        return
    user = job_quota_user(job_id, _text(raw, "user"))
    account = _text(raw, "quota_account")
    if "|" in account or not account.strip():
        account = ""
    ending = json.dumps({"job": job_id, "user": user, "account": account,
                         "held_s": round(held_s, 3), "units": round(units, 6)})  # fmt: skip
    args: list[str] = [f"user|{user}" if user else "", f"account|{account}" if account else "",
                       repr(units)]  # fmt: skip
    for p in periods_at(now, tz_name):
        ttl_s = max(int(p.end_at - now + _PERIOD_SLACK_S), 1)
        args += [keys.quota_spent(p.name, p.period_id), str(ttl_s)]
    args += [keys.quota_ended(), repr(now), ending, repr(now - ENDED_KEPT_S), job_id,
             keys.quota_running("account", account)]  # fmt: skip
    pipe.eval(SPEND, 0, *args)
