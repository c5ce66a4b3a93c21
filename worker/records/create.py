"""Recording new jobs, and the duplicate guard that keeps one job per idempotency key.

Owns the atomic creation script behind `Ledger.create_many`: a batch (a sweep) is recorded all
or none, in one round trip. An idempotency key already held by a live job or a job that
SUCCEEDED yields that job and writes nothing (invariant 8: submitting the same key twice, from
any machine, yields one job). A key whose job ended any other way (FAILED, CANCELLED, TIMED_OUT,
FAILED_LOST, VM_LOST, FAILED_NO_GPU, FAILED_BUDGET) or whose record expired is free again: the
new job is recorded, the key then names it, and the two are linked (`retry_of` on the new record,
`retried_as` on the old). Reading and transitions are the ledger's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from worker.errors import RunNameInUse
from worker.flow.sweeps import SweepTag, sweep_base
from worker.people.owners import owner_of
from worker.records.events import events_key
from worker.records.keys import Keys
from worker.spec import JobSpec, destination, encode_spec
from worker.states import TERMINAL, JobState

# States whose job no longer holds its idempotency key: it may be submitted again.
RESUBMITTABLE = frozenset(TERMINAL - {JobState.SUCCEEDED})

# KEYS: live destinations, jobs, active, events. ARGV: the job keys' prefix, exclusive, now,
# terminal states (comma-joined), the QUEUED history entry, resubmittable states (comma-joined),
# the sweep's id ('' for none), its base key and its cap (`worker.flow.sweeps`), the number of
# jobs n, then per job: id, its idempotency key, destination, spec JSON, run name, gpu, submitted
# by, its job key, its history key, its dependencies (`worker.flow.deps`, '' for none); then the
# messages to send, each (its job's index, its queue, the message: `worker.fleet.messages`),
# pushed for the jobs created only. Returns per job (id, created, the job it replaces or ''), or
# (-(index + 1), holder id, holder state) for a refusal.
CREATE_SCRIPT = """
local jobkey, exclusive, now, entry = ARGV[1], ARGV[2] == '1', ARGV[3], ARGV[5]
local terminal, again = {}, {}
for st in string.gmatch(ARGV[4], '[^,]+') do terminal[st] = true end
for st in string.gmatch(ARGV[6], '[^,]+') do again[st] = true end
local out, todo, replaced, made = {}, {}, {}, {}
local sweep, sweepkey = ARGV[7], ARGV[8]
local n = tonumber(ARGV[10])
for k = 0, n - 1 do
  local b = 10 + 10 * k
  local existing = redis.call('GET', ARGV[b + 2])
  local kept = nil
  if existing then
    local st = redis.call('HGET', jobkey .. existing, 'state')
    if st and not again[st] then kept = existing end
  end
  if kept then
    out[#out + 1] = kept; out[#out + 1] = 0; out[#out + 1] = ''
  else
    local holder = redis.call('HGET', KEYS[1], ARGV[b + 3])
    if exclusive and holder then
      local st = redis.call('HGET', jobkey .. holder, 'state')
      if st and not terminal[st] then return {-(k + 1), holder, st} end
    end
    local old = ''
    if existing and redis.call('EXISTS', jobkey .. existing) == 1 then old = existing end
    out[#out + 1] = ARGV[b + 1]; out[#out + 1] = 1; out[#out + 1] = old
    todo[#todo + 1] = b
    made[k] = true
    replaced[#replaced + 1] = old
  end
end
for i, b in ipairs(todo) do
  local id = ARGV[b + 1]
  redis.call('HSET', KEYS[1], ARGV[b + 3], id)
  redis.call('SET', ARGV[b + 2], id)
  redis.call('HSET', ARGV[b + 8], 'spec', ARGV[b + 4], 'state', 'queued', 'owner', '',
             'reason', 'submitted', 'created_at', now, 'updated_at', now,
             'run_name', ARGV[b + 5], 'gpu', ARGV[b + 6], 'user', ARGV[b + 7])
  if replaced[i] ~= '' then
    redis.call('HSET', ARGV[b + 8], 'retry_of', replaced[i])
    redis.call('HSET', jobkey .. replaced[i], 'retried_as', id)
  end
  redis.call('RPUSH', ARGV[b + 9], entry)
  -- KEYS[4]: the event log (`worker.records.events`)
  redis.call('XADD', KEYS[4], '*', 'job', id, 'kind', 'submit', 'from', '', 'e', entry)
  redis.call('ZADD', KEYS[2], now, id)
  redis.call('SADD', KEYS[3], id)
  if ARGV[b + 10] ~= '' then
    -- Its dependencies (`worker.flow.deps`): `@N` is the batch's N-th job (an earlier step).
    local deps = {}
    for dep, cond in string.gmatch(ARGV[b + 10], '([^,:]+):([^,]+)') do
      if string.sub(dep, 1, 1) == '@' then dep = out[3 * tonumber(string.sub(dep, 2)) + 1] end
      deps[#deps + 1] = dep .. ':' .. cond
      redis.call('SADD', jobkey .. dep .. ':dependants', id)
      if redis.call('EXISTS', jobkey .. dep) == 1 then
        redis.call('HSET', jobkey .. dep, 'dependants', '1')
      end
    end
    redis.call('HSET', ARGV[b + 8], 'after', table.concat(deps, ','))
  end
  if sweep ~= '' then
    redis.call('HSET', ARGV[b + 8], 'sweep', sweep)
    redis.call('ZADD', sweepkey .. ':jobs', i, id)
  end
end
if sweep ~= '' and #todo > 0 then
  redis.call('HSET', sweepkey, 'max_parallel', ARGV[9], 'created_at', now)
end
for m = 11 + 10 * n, #ARGV, 3 do
  if made[tonumber(ARGV[m])] then redis.call('LPUSH', ARGV[m + 1], ARGV[m + 2]) end
end
return out
"""


def create_jobs(
    script: Any,
    keys: Keys,
    now: float,
    entry: str,
    specs: Sequence[JobSpec],
    *,
    exclusive: bool,
    sweep: SweepTag | None = None,
    after: Sequence[str] = (),
    messages: Sequence[Sequence[tuple[str, str]]] = (),
) -> list[tuple[str, bool]]:
    """Run `CREATE_SCRIPT` (registered by the ledger) for `specs`, each with the QUEUED history
    entry `entry`, as points of `sweep` if given, each after its `after` (encoded dependencies,
    `worker.flow.deps`; '' or none for none), each new one's `messages` (queue, message) pushed
    in the same step: (job id, created) each."""
    if not specs:
        return []
    k = keys
    argv: list[str] = [k.job(""), "1" if exclusive else "0", repr(now)]
    argv.append(",".join(s.value for s in TERMINAL))
    argv.append(entry)
    argv.append(",".join(s.value for s in RESUBMITTABLE))
    if sweep is None:
        argv += ["", "", "0"]
    else:
        argv += [sweep.sweep_id, sweep_base(k, sweep.sweep_id), str(sweep.max_parallel)]
    argv.append(str(len(specs)))
    for i, spec in enumerate(specs):
        argv += [
            spec.job_id, k.idempotency(spec.idempotency_key, owner_of(spec.job_id)),
            destination(spec),
            encode_spec(spec), spec.run_name, spec.gpu.value, spec.submitted_by,
            k.job(spec.job_id), k.history(spec.job_id), after[i] if i < len(after) else "",
        ]  # fmt: skip
    for i, copies in enumerate(messages):
        for queue, message in copies:
            argv += [str(i), queue, message]
    reply = script(keys=[k.live_destinations(), k.jobs(), k.active(), events_key(k)], args=argv)
    if isinstance(reply[0], int):  # a refusal: (-(index + 1), holder, its state)
        i = -reply[0] - 1
        raise RunNameInUse(
            specs[i].run_name, reply[1].decode(), reply[2].decode().upper(), destination(specs[i])
        )
    return [(reply[3 * i].decode(), bool(int(reply[3 * i + 1]))) for i in range(len(specs))]
