"""A job given back to the queue, untouched, in one atomic step; and the jobs waiting for
capacity, sent again when their next try is due.

`put_back` moves a job that holds no session from QUEUED or ALLOCATING back to QUEUED as its
owner (or, for a job never claimed, as nobody): the owner cleared, the lock and lease dropped,
the attempt appended to the record's `putbacks` (when, which worker, the cause, why) and to its
history. A capacity wait also records its next try (`retry_at`, in the deferred set) and its
refusals; `promote_due` takes the due ones out of the deferred set, once, for whoever sends
them. A job whose record holds an endpoint is never put back (it may hold a GPU).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from worker.errors import ColabqError, JobNotFound, StaleOwner
from worker.fleet.causes import Cause
from worker.flow.slots import free_slot
from worker.quota.release import free_quota
from worker.records import ids
from worker.records.events import events_key
from worker.records.ledger import Ledger
from worker.states import JobState

# KEYS: job hash, history, lock, leases, deferred, events. ARGV: owner, job id, now, history entry,
# the put-back entry (JSON), reason, retry_at ('' for none), refusals ('' to keep), capacity
# since ('' to keep), '1' when the job is RELEASING a session verified gone. Returns {1, the
# putbacks JSON} or {code, detail} for a refusal: -1 no record, -2 not the owner, -3 not
# QUEUED/ALLOCATING (the state), -4 an endpoint is recorded.
_PUT_BACK = """
local st = redis.call('HGET', KEYS[1], 'state')
if not st then return {-1, ''} end
if (redis.call('HGET', KEYS[1], 'owner') or '') ~= ARGV[1] then return {-2, ''} end
local released = ARGV[10] == '1' and st == 'releasing'
if st ~= 'queued' and st ~= 'allocating' and not released then return {-3, st} end
if released then
  -- Its session verified gone: the held-time clock stops here, as a transition's would.
  local since = redis.call('HGET', KEYS[1], 'held_since')
  if since then
    redis.call('HINCRBYFLOAT', KEYS[1], 'held_s', math.max(tonumber(ARGV[3]) - tonumber(since), 0))
    redis.call('HDEL', KEYS[1], 'held_since')
  end
  redis.call('HDEL', KEYS[1], 'endpoint')
elseif redis.call('HEXISTS', KEYS[1], 'endpoint') == 1 then
  return {-4, ''}
end
local raw = redis.call('HGET', KEYS[1], 'putbacks')
local list = raw and cjson.decode(raw) or {}
list[#list + 1] = cjson.decode(ARGV[5])
local encoded = cjson.encode(list)
redis.call('HSET', KEYS[1], 'state', 'queued', 'owner', '', 'reason', ARGV[6],
           'updated_at', ARGV[3], 'putbacks', encoded)
redis.call('HDEL', KEYS[1], 'session', 'worker', 'wall_deadline_at', 'phase', 'owner_host',
           'nonce', 'segment', 'restarts', 'pending_outcome', 'pending_reason',
           'pending_cause')
if ARGV[8] ~= '' then redis.call('HSET', KEYS[1], 'capacity_refusals', ARGV[8]) end
if ARGV[9] ~= '' then redis.call('HSET', KEYS[1], 'capacity_since', ARGV[9]) end
if ARGV[7] ~= '' then
  redis.call('HSET', KEYS[1], 'retry_at', ARGV[7])
  redis.call('ZADD', KEYS[5], ARGV[7], ARGV[2])
else
  redis.call('HDEL', KEYS[1], 'retry_at')
end
if redis.call('GET', KEYS[3]) == ARGV[1] and ARGV[1] ~= '' then redis.call('DEL', KEYS[3]) end
redis.call('ZREM', KEYS[4], ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[4])
redis.call('XADD', KEYS[6], '*', 'job', ARGV[2], 'kind', 'state', 'from', st, 'e', ARGV[4])
return {1, encoded}
"""

# KEYS: deferred. ARGV: now, most, the job keys' prefix. The due ids still QUEUED and unowned
# (each taken out of the set once, whoever asks).
_PROMOTE = (
    ids.LUA_NAMES
    + """
local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])) do
  redis.call('ZREM', KEYS[1], id)
  local k = ARGV[3] .. id
  local st, owner = nil, ''
  if is_job_id(id) then  -- a member that is no job id is dropped, naming no key
    st, owner = redis.call('HGET', k, 'state'), redis.call('HGET', k, 'owner') or ''
  end
  if st == 'queued' and owner == '' then
    redis.call('HDEL', k, 'retry_at')
    out[#out + 1] = id
  end
end
return out
"""
)


@dataclass(frozen=True)
class Attempt:
    """One put-back: when, by which worker, the cause and why."""

    at: float
    worker: str
    cause: Cause
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"at": self.at, "worker": self.worker, "cause": self.cause.value,
                "reason": self.reason}  # fmt: skip


def attempts_of(raw: str | None) -> list[Attempt]:
    """The record's `putbacks` field, oldest first (entries that do not parse are skipped)."""
    try:
        items = json.loads(raw or "[]")
    except ValueError:
        return []
    out = []
    for d in items if isinstance(items, list) else []:
        try:
            out.append(
                Attempt(float(d["at"]), str(d["worker"]), Cause(d["cause"]), str(d["reason"]))
            )
        except (KeyError, TypeError, ValueError):
            continue
    return out


def poison_reason(attempts: Sequence[Attempt], hosts: int) -> str | None:
    """Why a job put back by `hosts` different workers for their own failures is poison (it
    breaks every host that takes it), or None."""
    by_worker: dict[str, str] = {}
    for a in attempts:
        if a.cause is Cause.HOST:
            by_worker[a.worker] = a.reason
    if len(by_worker) < hosts:
        return None
    each = "; ".join(f"{w}: {r}" for w, r in by_worker.items())
    return f"put back by {len(by_worker)} hosts, each for its own failure: {each}"[:1000]


def put_back(
    ledger: Ledger,
    job_id: str,
    owner: str,
    attempt: Attempt,
    reason: str,
    *,
    retry_at: float | None = None,
    refusals: int | None = None,
    capacity_since: float | None = None,
    released: bool = False,
) -> list[Attempt]:
    """Give the job back (see the module's docstring); returns every put-back so far. Raises
    StaleOwner if `owner` is not the job's owner or the job moved on, JobNotFound if gone."""
    k = ledger.keys
    entry = ledger.entry(JobState.QUEUED, attempt.at, reason)
    keys = [k.job(job_id), k.history(job_id), k.lock(job_id), k.leases(), k.deferred(),
            events_key(k)]  # fmt: skip
    args = [
        owner, job_id, repr(attempt.at), entry, json.dumps(attempt.to_json()), reason[:1000],
        "" if retry_at is None else repr(retry_at), "" if refusals is None else str(refusals),
        "" if capacity_since is None else repr(capacity_since), "1" if released else "",
    ]  # fmt: skip
    code, detail = ledger.r.eval(_PUT_BACK, len(keys), *keys, *args)
    if int(code) == -1:
        raise JobNotFound(job_id)
    if int(code) < 0:
        raise StaleOwner(job_id)
    free_slot(ledger.r, k, job_id, attempt.at)  # a sweep's point gives its slot back
    free_quota(ledger.r, k, job_id, attempt.at)  # and its user's and account's (`worker.quota`)
    return attempts_of(detail.decode() if isinstance(detail, bytes) else str(detail))


def promote_due(ledger: Ledger, now: float, most: int = 100) -> list[str]:
    """The jobs whose capacity wait is over, each returned to exactly one caller, who sends
    them (a caller that dies before sending leaves a QUEUED job with no message: the janitor
    sends it again)."""
    k = ledger.keys
    raw = ledger.r.eval(_PROMOTE, 1, k.deferred(), repr(now), str(most), k.job(""))
    return ids.members("job id", raw, k.deferred())


def give_back_host(
    ledger: Ledger,
    job_id: str,
    owner: str,
    attempt: Attempt,
    poison_hosts: int,
    *,
    released: bool = False,
) -> tuple[JobState, str]:
    """Put the job back for a host failure; FAILED instead when it is poison (several workers
    gave it back, each for its own failure). Returns the state it is in and why."""
    reason = f"put back by {attempt.worker}: {attempt.reason}"
    attempts = put_back(ledger, job_id, owner, attempt, reason, released=released)
    if why := poison_reason(attempts, poison_hosts):
        try:
            ledger.transition(job_id, JobState.FAILED, owner="", reason=why)
        except ColabqError:
            return JobState.QUEUED, reason  # another worker took it meanwhile
        return JobState.FAILED, why
    return JobState.QUEUED, reason
