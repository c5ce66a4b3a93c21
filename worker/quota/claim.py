"""Quotas at claim time: the part of the claim script (`worker.records.claim`) that keeps a job
waiting while its user or its account is at a quota, and takes their GPU slots in the same
atomic step as the claim, so the fleet never goes over whatever the number of workers.

Per scope (the job's user, then the claiming worker's account) that has limits:
- **gpus**: the scope's running set (`Keys.quota_running`: every job from its claim to its end
  or put-back) is counted, after dropping members that are over, gone, or back in the queue
  unowned, and whose lease is not live (a slot a user's own cancel could not give back heals
  here; a record its owner rewrote as over does not, while its runner holds its lease); at the
  limit the job waits.
- **units_day/week/month**: what the scope's jobs that ended in the period spent (the sums kept
  where jobs end, `worker.quota.release`) plus what its running jobs have held so far (rate x
  held time, as `colabq status` counts it). A unit quota stops new starts only: a running job
  is never stopped for it, and counting its units so far stops the next start as soon as the
  running jobs have spent the quota, not only once they end.

A waiting job stays QUEUED with no worker held: its reason says which quota (`waiting: quota
alice gpus 2 of 2 running`; `... units-day 50.2 of 50 used, until 2026-05-02 00:00 UTC`), it
joins the scope's waiting queue (the first is made due when a slot frees) and gets a next try:
a backstop (`BACKSTOP_S`) for a GPU quota; the period's end for a user's unit quota (nothing can
start it sooner but an operator's change, which makes it due); for an account's, the backstop,
since a worker of another account may run it. A damaged limit keeps the scope's jobs waiting
(backstop) with a reason saying so. The Python twin of this decision is `worker.quota.check`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from worker.colab.rates import RATES_PER_HOUR
from worker.flow.slots import BACKSTOP_S
from worker.quota.limits import LIMITS
from worker.quota.periods import PERIODS, periods_at
from worker.states import TERMINAL

if TYPE_CHECKING:
    from worker.records.keys import Keys


def _lua_table(items: dict[str, str]) -> str:
    return "{" + ", ".join(f"[{k!r}] = {v}" for k, v in items.items()) + "}"


# Lua helpers shared by the claim and the release scripts: numbers read back (nil: absent,
# false: damaged), a quantity as reasons print it, and the job's quota user (as `job_quota_user`).
QUOTA_BASE = (
    """
local Q_LIMITS = {LIMITS}
local Q_PERIODS = {PERIODS}
local Q_TERMINAL = TERMINAL_TABLE
local Q_RATES = RATES_TABLE
local function q_num(v)
  if not v then return nil end
  local n = tonumber(v)
  if not n or n ~= n or n < 0 or n >= math.huge then return false end
  return n
end
local function q_fmt(x)
  local s = string.format(x >= 1 and '%.2f' or '%.3g', x)
  if string.find(s, '%.') and not string.find(s, 'e') then
    s = string.gsub(string.gsub(s, '0+$', ''), '%.$', '')
  end
  return s
end
local function q_user(job, id)
  local u = string.match(id, '%.(.+)$')
  if not u then u = string.match(redis.call('HGET', job, 'user') or '', '^[^@]*') end
  if u and #u <= 64 and string.match(u, '^[%w][%w%._%-]*$') then return u end
  return ''
end
""".replace("{LIMITS}", "{" + ", ".join(repr(x) for x in LIMITS) + "}")
    .replace("{PERIODS}", "{" + ", ".join(repr(x) for x in PERIODS) + "}")
    .replace("TERMINAL_TABLE", _lua_table({s.value: "true" for s in sorted(TERMINAL)}))
    .replace("RATES_TABLE", _lua_table({k: repr(v) for k, v in RATES_PER_HOUR.items()}))
)

# Lua, inside the claim script after the sweep's cap (`TAKE_SLOT`) and before the lock: `id`,
# `now`, `job`, `deferred` given; KEYS[9] the limits, KEYS[10..12] the day's, week's and
# month's spent sums; ARGV[14] the claiming worker's account, ARGV[15..18] the running and
# waiting keys' bases (user, account), ARGV[19] the job keys' base, ARGV[20..22] the periods'
# ends, ARGV[23..25] their ends as text. Returns {'waiting', retry_at} for a job that waits;
# once claimed, `TOOK_QUOTA` takes the slots.
TAKE_QUOTA = (
    QUOTA_BASE
    + """
local function q_live(set, id, now)
  local live, units = 0, 0
  for _, m in ipairs(redis.call('SMEMBERS', set)) do
    if m ~= id then
      local f = redis.call('HMGET', ARGV[19] .. m, 'state', 'owner', 'gpu', 'held_s', 'held_since')
      local over = (not f[1]) or Q_TERMINAL[f[1]] or (f[1] == 'queued' and (f[2] or '') == '')
      -- A live lease (KEYS[3]: only services write it) outweighs a record its owner may write.
      local lease = tonumber(redis.call('ZSCORE', KEYS[3], m) or '0')
      if over and lease <= now then
        redis.call('SREM', set, m)
      else
        live = live + 1
        local held, since = q_num(f[4]) or 0, q_num(f[5])
        if since then held = held + math.max(now - since, 0) end
        units = units + (Q_RATES[string.upper(f[3] or '')] or 0) * held / 3600
      end
    end
  end
  return live, units
end
local function q_check(kind, name, label, running, now, id)
  local fields = {}
  for i, l in ipairs(Q_LIMITS) do fields[i] = kind .. '|' .. name .. '|' .. l end
  local raw = redis.call('HMGET', KEYS[9], unpack(fields))
  local any = false
  for i = 1, #Q_LIMITS do
    if raw[i] then
      any = true
      if q_num(raw[i]) == false then
        return 'waiting: quota ' .. label .. ' ' .. Q_LIMITS[i] .. ' is damaged (' ..
          string.sub(raw[i], 1, 40) .. '): an operator sets it again (colabq quota set)',
          now + BACKSTOP
      end
    end
  end
  if not any then return nil end
  local live, held = q_live(running, id, now)
  local gpus = q_num(raw[1])
  if gpus and live >= gpus then
    return 'waiting: quota ' .. label .. ' gpus ' .. live .. ' of ' .. q_fmt(gpus) .. ' running',
      now + BACKSTOP
  end
  for p = 1, #Q_PERIODS do
    local lim = q_num(raw[p + 1])
    if lim then
      local spent = q_num(redis.call('HGET', KEYS[9 + p], kind .. '|' .. name))
      if spent == false then spent = math.huge end
      local used = (spent or 0) + held
      if used >= lim then
        local retry = tonumber(ARGV[19 + p])
        if kind ~= 'user' then retry = math.min(retry, now + BACKSTOP) end
        return 'waiting: quota ' .. label .. ' units-' .. Q_PERIODS[p] .. ' ' .. q_fmt(used) ..
          ' of ' .. q_fmt(lim) .. ' used, until ' .. ARGV[22 + p], retry
      end
    end
  end
  return nil
end
local qnow, quser, qacct = tonumber(now), q_user(job, id), ARGV[14]
if not string.match(qacct, '^[^%s@|]+@[^%s@|]+$') then qacct = '' end
for _, s in ipairs({{'user', quser, quser, ARGV[15], ARGV[17]},
                    {'account', qacct, 'account ' .. qacct, ARGV[16], ARGV[18]}}) do
  if s[2] ~= '' then
    local why, retry = q_check(s[1], s[2], s[3], s[4] .. s[2], qnow, id)
    if why then
      -- A user's quota holds the job everywhere; an account's only its own workers: no
      -- `retry_at` then (it would refuse the others), only the deferred set's backstop.
      local at = string.format('%.3f', retry)
      if s[1] == 'user' then redis.call('HSET', job, 'retry_at', at)
      else redis.call('HDEL', job, 'retry_at') end
      redis.call('HSET', job, 'reason', why)
      redis.call('ZADD', deferred, at, id)
      redis.call('ZADD', s[5] .. s[2], 'NX', redis.call('HGET', job, 'created_at') or now, id)
      return {'waiting', at}
    end
  end
end
""".replace("BACKSTOP", str(BACKSTOP_S))
)

TOOK_QUOTA = """
if quser ~= '' then
  redis.call('SADD', ARGV[15] .. quser, id)
  redis.call('ZREM', ARGV[17] .. quser, id)
end
if qacct ~= '' then
  redis.call('SADD', ARGV[16] .. qacct, id)
  redis.call('ZREM', ARGV[18] .. qacct, id)
end
redis.call('HSET', job, 'quota_user', quser, 'quota_account', qacct)
"""


def quota_claim_args(
    keys: Keys, account: str, now: float, tz_name: str
) -> tuple[list[str], list[str]]:
    """The claim script's quota KEYS (from KEYS[9]) and ARGV (from ARGV[14])."""
    periods = periods_at(now, tz_name)
    claim_keys = [keys.quota_limits(), *(keys.quota_spent(p.name, p.period_id) for p in periods)]
    args = [
        account,
        keys.quota_running("user", ""), keys.quota_running("account", ""),
        keys.quota_waiting("user", ""), keys.quota_waiting("account", ""),
        keys.job(""),
        *(repr(p.end_at) for p in periods), *(p.end_text for p in periods),
    ]  # fmt: skip
    return claim_keys, args
