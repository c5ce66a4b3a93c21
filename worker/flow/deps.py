"""Jobs that wait for others (`--after JOB[:ok|any|notok]`, a job file's `after:` and `steps:`).

A dependant is recorded QUEUED with its dependencies in its record (`after`: `ID:COND,...`) and
each dependency's `:dependants` set names it (the creation script, `worker.records.create`). Its
message is sent as any job's, but the claim refuses it while a dependency is not over, or ended
otherwise than asked, deferring it as a capacity wait does (QUEUED, no worker slot held, a
backstop `retry_at` in the deferred set; `status` says what it waits for). When a dependency
ends (`Ledger.transition` to a terminal state) its dependants are made due at once; whoever
promotes a due job (`fleet.prober`) then asks `verdict`: still waiting (deferred again), free to
run (sent), or never (ended CANCELLED with the reason).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from worker.errors import UserInputError
from worker.records import ids
from worker.states import TERMINAL, JobState

if TYPE_CHECKING:
    from worker.records.keys import Keys
    from worker.records.ledger import Ledger

Cond = Literal["ok", "any", "notok"]
CONDS: tuple[Cond, ...] = ("ok", "any", "notok")
BACKSTOP_S = 30
_WANT = {"ok": "succeed", "notok": "end without success", "any": "end"}


@dataclass(frozen=True)
class Dep:
    job: str  # a job id, or `@N`: the batch's N-th job (a job file's earlier step)
    cond: Cond = "ok"


def parse_after(values: tuple[str, ...] | list[str]) -> list[Dep]:
    """`JOB[:ok|any|notok]` each (default ok)."""
    deps = []
    for v in values:
        job, _, cond = v.strip().partition(":")
        cond = cond or "ok"
        if not job or cond not in CONDS:
            raise UserInputError(f"--after {v!r}: expected JOB[:ok|any|notok] (e.g. 3f2a:ok).")
        deps.append(Dep(job, cond))
    return deps


def encode(deps: list[Dep]) -> str:
    return ",".join(f"{d.job}:{d.cond}" for d in deps)


def decode(text: str) -> list[Dep]:
    return parse_after(text.split(",")) if text else []


def satisfied(cond: str, state: JobState) -> bool:
    ok = state is JobState.SUCCEEDED
    return cond == "any" or (ok if cond == "ok" else not ok)


def verdict(ledger: Ledger, job_id: str) -> tuple[Literal["go", "wait", "never"], str]:
    """Whether the job's dependencies let it run now, and why not."""
    raw = ledger.r.hget(ledger.keys.job(job_id), "after")
    for d in decode(ids.text(raw) or ""):
        if ids.job_id(d.job) is None:  # names no job: it can never run (`ids`)
            return "never", f"dependency {ids.shown(d.job)} is not a job id"
        st = ledger.r.hget(ledger.keys.job(d.job), "state")
        if st is None:
            return "never", f"dependency {d.job} is gone (its record expired)"
        try:
            state = JobState(ids.text(st) or "")
        except ValueError:
            return "never", f"dependency {d.job}'s record is damaged (state {ids.shown(st)})"
        if state not in TERMINAL:
            return "wait", f"waiting for {d.job} ({state.name}) to {_WANT[d.cond]}"
        if not satisfied(d.cond, state):
            need = {"ok": "SUCCEEDED", "notok": "not SUCCEEDED"}[d.cond]
            return "never", f"dependency {d.job} ended {state.name} (needed {need})"
    return "go", ""


def defer(ledger: Ledger, job_id: str, reason: str, now: float) -> None:
    """Park a job that still waits: no message, its next look `BACKSTOP_S` away at the latest."""
    retry = now + BACKSTOP_S
    with ledger.r.pipeline() as pipe:
        pipe.hset(ledger.keys.job(job_id), mapping={"retry_at": repr(retry), "reason": reason})
        pipe.zadd(ledger.keys.deferred(), {job_id: retry})
        pipe.execute()


# Lua, inside the claim script: `job`, `id`, `now`, `pfx`, `deferred` given. A job whose
# dependencies are not all over as asked is deferred and refused ({'waiting', retry_at}); one
# that can never run is made due now, for the prober to end it.
WAIT_DEPS = """
local after = redis.call('HGET', job, 'after')
if after and after ~= '' and pfx ~= '' then
  for dep, cond in string.gmatch(after, '([^,:]+):([^,]+)') do
    local dst = redis.call('HGET', pfx .. ':job:' .. dep, 'state')
    local over = dst and TERMINAL_STATES[dst]
    local ok = (cond == 'any') or (cond == 'ok' and dst == 'succeeded')
               or (cond == 'notok' and dst ~= 'succeeded')
    if not over or not ok then
      local retry = now
      if dst and not over then retry = tostring(tonumber(now) + BACKSTOP) end
      local want = ({ok = 'succeed', notok = 'end without success', any = 'end'})[cond]
      redis.call('HSET', job, 'retry_at', retry, 'reason', 'waiting for ' .. dep .. ' ('
                 .. string.upper(dst or 'gone') .. ') to ' .. (want or 'end'))
      redis.call('ZADD', deferred, retry, id)
      return {'waiting', retry}
    end
  end
end
""".replace("BACKSTOP", str(BACKSTOP_S)).replace(
    "TERMINAL_STATES",
    "({" + ", ".join(f"{s.value} = true" for s in sorted(TERMINAL)) + "})",
)

# KEYS: the job hash. ARGV: the key prefix, job id, now, the deferred set (undeclared, written
# with pcall: a write Redis ACLs refuse leaves the dependant to its backstop retry). The job's
# dependants still QUEUED and unowned are made due now (`fleet.prober` then judges each).
NUDGE = (
    ids.LUA_NAMES
    + """
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1] .. ':dependants')) do
  local k = ARGV[1] .. ':job:' .. id
  local st, owner = nil, ''
  if is_job_id(id) then  -- a member that is no job id names no key (`worker.records.ids`)
    st, owner = redis.call('HGET', k, 'state'), redis.call('HGET', k, 'owner') or ''
  end
  if st == 'queued' and owner == '' then
    redis.pcall('HSET', k, 'retry_at', ARGV[3])
    redis.pcall('ZADD', ARGV[4], ARGV[3], id)
  end
end
"""
)


def nudge_dependants(client: Any, keys: Keys, job_id: str, now: float) -> None:
    """Run `NUDGE` on `client` (a pipeline inside the ending job's transaction)."""
    client.eval(NUDGE, 1, keys.job(job_id), keys.prefix, job_id, repr(now), keys.deferred())


def release_or_settle(ledger: Ledger, job_id: str, now: float) -> bool:
    """For a due job: True when it may be sent; a job still waiting for its dependencies is
    deferred again, and one that can never run ends CANCELLED with the reason."""
    what, why = verdict(ledger, job_id)
    if what == "wait":
        defer(ledger, job_id, why, now)
    elif what == "never":
        ledger.cancel(job_id, why)
    return what == "go"
