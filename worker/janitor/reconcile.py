"""Chunked reconciliation: live jobs missing from the index of live jobs are found and put back.

A janitor pass reads the live jobs through `Keys.active`, a set users write when they submit or
cancel. An id removed from it (by hand, by a hostile client, by a lost write) would leave its job
QUEUED for ever once its queue message is gone too. So each pass also walks a chunk of the job
records themselves, the ground truth no index can hide: SCAN (MATCH `<prefix>:job:*`, TYPE hash)
from the cursor the last pass left (`Keys.reconcile_cursor`), over `janitor_reconcile_keys` keys
of the database; a script per `CHECK_IDS` job ids found (checked against the grammar) reads
their states and returns those not terminal that `active` lacks: the strays. Acting on them is
the pass's: they go back into `active` (and `jobs`, if missing there too), and the same pass
treats them as any live job (a QUEUED one whose message is gone is sent again, once).

Cost: a round trip per `SCAN_COUNT` keys walked and one for the checks (pipelined; the restores
ride in the pass's write batch); no command holds Redis more than a few milliseconds; the work
is bounded by the keys walked, not by the ledger's size, and a whole cycle over a database of K
keys takes K / `janitor_reconcile_keys` passes (README, "The janitor"). Finding is kept apart
from acting; a dry run restores nothing and leaves the cursor where it was.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from worker.records import ids
from worker.records.ledger import Ledger
from worker.states import TERMINAL

SCAN_COUNT = 2000  # keys one SCAN call walks (a few ms of Redis's time); a pass makes several
CHECK_IDS = 500  # job ids one check script reads (a millisecond or two of Redis's time)

# KEYS: active. ARGV: the job keys' prefix (`<prefix>:job:`), then job ids (checked by the
# grammar). Returns {id1, state1, created_at1, id2, ...} for those whose state is not terminal
# and that `active` lacks: the answer is as small as what is wrong, whatever was walked.
_CHECK = """
local terminal = TERMINAL_STATES
local out = {}
for i = 2, #ARGV do
  local key = ARGV[1] .. ARGV[i]
  local st = redis.call('HGET', key, 'state')
  if st and not terminal[st] and redis.call('SISMEMBER', KEYS[1], ARGV[i]) == 0 then
    out[#out + 1] = ARGV[i]
    out[#out + 1] = st
    out[#out + 1] = redis.call('HGET', key, 'created_at') or ''
  end
end
return out
""".replace(
    "TERMINAL_STATES", "({" + ", ".join(f"{s.value} = true" for s in sorted(TERMINAL)) + "})"
)


@dataclass(frozen=True)
class Stray:
    """A job whose record says it is live (`state`) while the index of live jobs lacks it."""

    job_id: str
    state: str
    created_at: float | None  # None: the record holds no number


@dataclass(frozen=True)
class Walk:
    strays: tuple[Stray, ...]
    cursor: str  # where the next pass starts ('0': this pass finished a cycle)


def find_strays(ledger: Ledger, keys_per_pass: int, *, dry_run: bool) -> Walk:
    """Walk the next `keys_per_pass` keys of the database: a SCAN call per `SCAN_COUNT` keys,
    then the found jobs' states and whether `active` lists them, a script per `CHECK_IDS` jobs
    (Redis is never held long). It changes nothing but, unless `dry_run`, where the next walk
    starts."""
    if keys_per_pass <= 0:
        return Walk((), "0")
    k, r = ledger.keys, ledger.r
    jobkey = k.job("")
    count = min(SCAN_COUNT, keys_per_pass)
    cursor = ids.text(r.get(k.reconcile_cursor())) or "0"
    cursor = cursor if cursor.isdigit() else "0"
    found: list[str] = []
    for _ in range(-(-keys_per_pass // count)):
        raw_cursor, keys = r.scan(int(cursor), match=f"{jobkey}*", count=count, _type="hash")
        cursor = str(raw_cursor)
        # A job's record is `<prefix>:job:<id>`; its other hashes (`:watch`) end otherwise.
        found += [i for key in keys if (i := ids.job_id((ids.text(key) or "")[len(jobkey) :]))]
        if cursor == "0":
            break
    # The found jobs checked in scripts of `CHECK_IDS` each (one pipelined round trip, none
    # holding Redis long), and the cursor kept.
    pipe = r.pipeline(transaction=False)
    for start in range(0, len(found), CHECK_IDS):
        pipe.eval(_CHECK, 1, k.active(), jobkey, *found[start : start + CHECK_IDS])
    if not dry_run:
        pipe.set(k.reconcile_cursor(), cursor)
    strays = []
    for reply in pipe.execute()[: -(-len(found) // CHECK_IDS)]:
        for raw_id, raw_state, raw_at in zip(reply[0::3], reply[1::3], reply[2::3], strict=True):
            if (job_id := ids.job_id(raw_id)) is not None:
                strays.append(Stray(job_id, ids.text(raw_state) or "?", _number(raw_at)))
    return Walk(tuple(strays), cursor)


def _number(raw: object) -> float | None:
    try:
        at = float(ids.text(raw) or "")
    except ValueError:
        return None
    return at if math.isfinite(at) else None


def queue_restore(pipe: Any, ledger: Ledger, strays: tuple[Stray, ...]) -> None:
    """Queue on `pipe` (the pass's write batch) the strays' return to the index of live jobs,
    and to the jobs index where their submission time is known and they are missing. A job
    that ended meanwhile is dropped from `active` again by the next pass, as any ended job is."""
    k = ledger.keys
    if strays:
        pipe.sadd(k.active(), *(s.job_id for s in strays))
    for s in strays:
        if s.created_at is not None:
            pipe.zadd(k.jobs(), {s.job_id: s.created_at}, nx=True)
