"""The job ledger in Redis: reading records, state history, cancel flags, log streams, and the
one door every caller goes through.

What a record is, and how it is read back, is `record.py`'s; creating jobs is `create.py`'s, the
first claim `claim.py`'s, and the lock, owner and lease of a job (claim, renew, adopt, take over,
restore, the janitor's lock) `ownership.py`'s, behind thin methods here.

`transition()` is the only writer of a job's state: it checks the edge against `states.ALLOWED`
and the caller's ownership token in one optimistic transaction, so a stale owner can never
overwrite a newer one. Key names come from `keys.Keys`. Nothing here ever stores a secret.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

import redis

from worker.clock import Clock
from worker.errors import AmbiguousJob, IllegalTransition, JobNotFound, StaleOwner
from worker.flow.deps import nudge_dependants
from worker.flow.slots import free_slot
from worker.flow.sweeps import SweepTag
from worker.metrics.ended import ended_facts, record_ended
from worker.people.identity import Identity, identify
from worker.people.owners import owner_of
from worker.quota.release import free_quota, spend
from worker.records import events, ids, ownership
from worker.records.create import CREATE_SCRIPT, create_jobs
from worker.records.forward import Feed
from worker.records.forward import ForwardItem as ForwardItem  # callers import it from here
from worker.records.keys import Keys
from worker.records.ownership import Renewal
from worker.records.record import (
    MAY_HOLD,
    DamagedRecord,
    HistoryEntry,
    JobRecord,
    LogLine,
    check_fields,
    decode_history,
    decode_record,
    history_entry,
)
from worker.records.txn import watched
from worker.records.unheld import cancel_unheld
from worker.spec import JobSpec, destination_key
from worker.states import TERMINAL, JobState, can_transition

# Start segment N of a job (its first, or a restart): the VM's console log starts again at 0
# and the previous segment's sentinels are cleared. Only the job's owner may do it.
# KEYS: job hash, watch hash. ARGV: owner, segment.
_START_SEGMENT = """
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
local fields = redis.call('HKEYS', KEYS[2])
for _, f in ipairs(fields) do
  if string.sub(f, 1, 5) == 'exec_' then redis.call('HDEL', KEYS[2], f) end
end
redis.call('HSET', KEYS[2], 'segment', ARGV[2], 'log_offset', '0')
return 1
"""

_CLAIMED = (JobState.QUEUED, JobState.ALLOCATING)

_RELEASE_DESTINATION = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
"""


# Resolve a job-id prefix: an exact id at once, else every id of the jobs index that starts with
# it and still has a record, newest first. KEYS: jobs. ARGV: the job keys' prefix, the id prefix,
# how many candidates to return. Returns {count, id1, run name1, ...} (at most that many pairs).
_FIND_BY_PREFIX = """
local jobkey, prefix, most = ARGV[1], ARGV[2], tonumber(ARGV[3])
if redis.call('EXISTS', jobkey .. prefix) == 1 then return {1, prefix, ''} end
local out = {0}
for _, id in ipairs(redis.call('ZREVRANGE', KEYS[1], 0, -1)) do
  if string.find(id, prefix, 1, true) == 1 and redis.call('EXISTS', jobkey .. id) == 1 then
    out[1] = out[1] + 1
    if out[1] <= most then
      out[#out + 1] = id
      out[#out + 1] = redis.call('HGET', jobkey .. id, 'run_name') or ''
    end
  end
end
return out
"""


class Ledger:
    def __init__(
        self,
        client: redis.Redis,
        clock: Clock,
        keys: Keys,
        *,
        log_maxlen: int,
        retention_s: float = 30 * 24 * 3600,
        quota_tz: str = "UTC",
    ) -> None:
        self.r: Any = client  # redis-py's stubs type replies as unions of everything
        self.clock = clock
        self.keys = keys
        self.log_maxlen = log_maxlen
        # A terminal job's record, history, log stream and observations expire this long after
        # it ended (its full log is in the store).
        self.retention_s = retention_s
        self.quota_tz = quota_tz  # the quotas' days, weeks and months (`worker.quota.periods`)
        self._create = client.register_script(CREATE_SCRIPT)
        # The observers' part (the attach client's and the watchdog's writes), shared with them.
        self.feed = Feed(client, keys, log_maxlen=log_maxlen, retention_s=retention_s)
        self._start_segment = client.register_script(_START_SEGMENT)
        self._identity: Identity | None = None

    @property
    def identity(self) -> Identity:
        """Who this process is on Redis (`ACL WHOAMI`, asked once): history entries name it."""
        if self._identity is None:
            self._identity = identify(self.r)
        return self._identity

    def acting_as(self, identity: Identity) -> Ledger:
        """This ledger (the same connection and scripts) writing history entries and events as
        `identity`: the gate acts for the user whose request it carries out (`worker.gate`)."""
        other = copy.copy(self)
        other._identity = identity
        return other

    def entry(self, state: JobState, at: float, reason: str, action: str = "") -> str:
        """A history entry (JSON) naming this process's actor and host."""
        me = self.identity
        return history_entry(state, at, reason, me.actor, me.host, action)

    # --- creation and reading ---------------------------------------------------------------

    def create(self, spec: JobSpec, *, exclusive: bool = True) -> tuple[str, bool]:
        """Record a new QUEUED job; returns (job id, created). An idempotency key held by a
        live or succeeded job yields that job (invariant 8), from any machine; one whose job
        failed, timed out or was cancelled or lost is free again. With `exclusive`, a live job
        writing to the same destination refuses it (RunNameInUse), atomically."""
        return self.create_many([spec], exclusive=exclusive)[0]

    def create_many(
        self,
        specs: Sequence[JobSpec],
        *,
        exclusive: bool = True,
        sweep: SweepTag | None = None,
        after: Sequence[str] = (),
        messages: Sequence[Sequence[tuple[str, str]]] = (),
    ) -> list[tuple[str, bool]]:
        """`create` for a batch (a sweep), in one atomic script and one round trip: either
        every new job is recorded (and its `messages`, (queue, message) each, pushed) or, when
        one of them is refused (RunNameInUse), none is. The duplicate guard holds against live
        and succeeded jobs only (`worker.records.create`)."""
        now = self.clock.time()
        entry = self.entry(JobState.QUEUED, now, "submitted")
        return create_jobs(
            self._create, self.keys, now, entry, specs, exclusive=exclusive, sweep=sweep,
            after=after, messages=messages,
        )  # fmt: skip

    def get(self, job_id: str) -> JobRecord:
        raw = self.r.hgetall(self.keys.job(job_id))
        if not raw:
            raise JobNotFound(job_id)
        return decode_record(job_id, raw)

    def state_of(self, job_id: str) -> JobState:
        """The job's state alone: one HGET, no spec decoded."""
        raw = self.r.hget(self.keys.job(job_id), "state")
        if raw is None:
            raise JobNotFound(job_id)
        try:
            return JobState(raw.decode())
        except ValueError:
            raise DamagedRecord(job_id, f"state {ids.shown(raw)} unknown") from None

    def exists(self, job_id: str) -> bool:
        return bool(self.r.exists(self.keys.job(job_id)))

    def history(self, job_id: str) -> list[HistoryEntry]:
        return decode_history(job_id, self.r.lrange(self.keys.history(job_id), 0, -1))

    def list_jobs(self, limit: int = 50) -> list[JobRecord]:
        """The newest `limit` jobs that can be read (a bad id or a damaged record is reported
        and skipped)."""
        found = ids.members("job id", self.r.zrevrange(self.keys.jobs(), 0, limit - 1),
                            self.keys.jobs())  # fmt: skip
        pipe = self.r.pipeline(transaction=False)
        for i in found:
            pipe.hgetall(self.keys.job(i))
        out = []
        for i, raw in zip(found, pipe.execute(raise_on_error=False), strict=True):
            try:
                if raw and not isinstance(raw, Exception):
                    out.append(decode_record(i, raw))
            except DamagedRecord as exc:
                ids.report("job record", self.keys.job(i), exc.why)
        return out

    def find_by_prefix(self, prefix: str, *, listed: int = 5) -> str:
        """Resolve a job id from its first few characters, in one round trip: the ids are
        matched inside Redis, never sent here, and an id whose record expired does not count.
        Raises JobNotFound, or AmbiguousJob naming the `listed` newest candidates."""
        if not prefix:
            raise JobNotFound(prefix)
        args = (1, self.keys.jobs(), self.keys.job(""), prefix, max(listed, 1))
        try:  # read-only: a user's ACL rule lets them read the index, not write it
            reply = self.r.eval_ro(_FIND_BY_PREFIX, *args)
        except redis.ResponseError as exc:
            if "unknown command" not in str(exc):
                raise
            reply = self.r.eval(_FIND_BY_PREFIX, *args)  # a server before Redis 7
        total = int(reply[0])
        found: list[str] = [v.decode(errors="replace") for v in reply[1:]]
        candidates = list(zip(found[0::2], found[1::2], strict=True))
        if total == 1:
            if ids.job_id(candidates[0][0]) is None:  # a key or index entry of no job
                raise JobNotFound(prefix)
            return candidates[0][0]
        if total == 0:
            raise JobNotFound(prefix)
        raise AmbiguousJob(prefix, candidates, total)

    # --- ownership and leases: `worker.records.ownership`'s -------------------------------

    def claim(self, job_id: str, owner: str, ttl_s: float) -> bool:
        return ownership.claim(self, job_id, owner, ttl_s)

    def renew(self, job_id: str, owner: str, ttl_s: float) -> Renewal:
        return ownership.renew(self, job_id, owner, ttl_s)

    def restore(
        self,
        spec: JobSpec,
        owner: str,
        state: JobState,
        ttl_s: float,
        *,
        held_since: float | None = None,
        **fields: str,
    ) -> bool:
        return ownership.restore(self, spec, owner, state, ttl_s, held_since=held_since, **fields)

    def release_lock(self, job_id: str, owner: str) -> None:
        ownership.release_lock(self, job_id, owner)

    def expired_leases(self, now: float) -> list[str]:
        return ownership.expired_leases(self, now)

    def drop_lease(self, job_id: str) -> None:
        ownership.drop_lease(self, job_id)

    def adopt(self, job_id: str, new_owner: str, ttl_s: float) -> bool:
        return ownership.adopt(self, job_id, new_owner, ttl_s)

    def take_over(self, job_id: str, old_owner: str, new_owner: str, ttl_s: float) -> bool:
        return ownership.take_over(self, job_id, old_owner, new_owner, ttl_s)

    def try_janitor_lock(self, token: str, ttl_s: float, account: str = "") -> bool:
        return ownership.try_janitor_lock(self, token, ttl_s, account)

    def release_janitor_lock(self, token: str, account: str = "") -> None:
        ownership.release_janitor_lock(self, token, account)

    # --- the one state writer ---------------------------------------------------------------

    def transition(
        self,
        job_id: str,
        dst: JobState,
        *,
        owner: str,
        reason: str,
        fields: Mapping[str, str] | None = None,
    ) -> None:
        """Move a job to `dst` if the edge is allowed and `owner` is the job's owner, and keep
        its held-time clock (`_hold`) in the same transaction."""
        extra = dict(fields or {})
        check_fields(extra)
        key = self.keys.job(job_id)
        now = self.clock.time()

        def txn(pipe: Any) -> None:
            raw = pipe.hgetall(key)
            if not raw:
                raise JobNotFound(job_id)
            src = JobState(raw[b"state"].decode())
            if raw.get(b"owner", b"").decode() != owner:
                raise StaleOwner(job_id)
            if src is dst and raw.get(b"reason", b"").decode() == reason:
                # This very transition, applied by an attempt whose reply an outage lost.
                return
            if not can_transition(src, dst):
                raise IllegalTransition(job_id, src.value, dst.value)
            pipe.multi()
            # `claimed_at`: when a run was claimed (as the claim script writes it), for metrics.
            claimed = {"claimed_at": repr(now)} if (src, dst) == _CLAIMED else {}
            pipe.hset(
                key,
                mapping={"state": dst.value, "reason": reason, "updated_at": repr(now), **extra,
                         **claimed},
            )  # fmt: skip
            entry = self.entry(dst, now, reason)
            pipe.rpush(self.keys.history(job_id), entry)
            events.append(pipe, self.keys, self.retention_s, job_id, events.STATE, src.value, entry)
            if "endpoint" in extra:
                pipe.hset(self.keys.endpoints(), extra["endpoint"], job_id)
            self._hold(pipe, key, raw.get(b"held_since"), src, dst, "endpoint" in extra, now)
            if dst in TERMINAL:
                pipe.srem(self.keys.active(), job_id)
                # What ended jobs add up to, for `colabq metrics` (one command).
                ended = ended_facts(raw, extra, dst, now)
                record_ended(pipe, self.keys, ended)
                # Its units, then its quota slots (`worker.quota`).
                spend(pipe, self.keys, job_id, raw, held_s=ended.held_s, units=ended.units,
                      now=now, tz_name=self.quota_tz)  # fmt: skip
                if b"quota_user" in raw or b"quota_account" in raw:
                    free_quota(pipe, self.keys, job_id, now)
                if b"sweep" in raw:  # its sweep's slot, if it held one (`worker.flow.slots`)
                    free_slot(pipe, self.keys, job_id, now)
                if b"dependants" in raw:  # jobs wait for this one (`worker.flow.deps`)
                    nudge_dependants(pipe, self.keys, job_id, now)
                if raw.get(b"tracker_run") or extra.get("tracker_run"):
                    pipe.zadd(self.keys.tracker_check(), {job_id: now})
                ttl = int(self.retention_s)
                for k in self._job_keys(job_id):
                    pipe.expire(k, ttl)
                spec_d = json.loads(raw[b"spec"])
                idem = spec_d.get("idempotency_key")
                if idem:
                    pipe.expire(self.keys.idempotency(idem, owner_of(job_id)), ttl)
                # Its destination is free again, unless a later job (allowed to share it)
                # holds it now: compare and delete, atomically.
                pipe.eval(_RELEASE_DESTINATION, 1, self.keys.live_destinations(),
                          destination_key(spec_d.get("artifact") or {}), job_id)  # fmt: skip

        watched(self.r, txn, key)

    def _hold(
        self,
        pipe: Any,
        key: str,
        held_since: bytes | None,
        src: JobState,
        dst: JobState,
        endpoint_recorded: bool,
        now: float,
    ) -> None:
        """The held-time clock (what the GPU costs; `worker.colab.rates` reads it). Invariant:
        `held_since` is set exactly while an assigned session may be billed. It starts when the
        assignment's endpoint is recorded (by the runner's `set_fields` the moment `colab new`
        returns, or by a transition that carries it) and stops when the job leaves RELEASING
        (the release verified, or a restart) or ends; each stop adds the segment to `held_s`,
        so the segments of a restarted job add up. Queued in the caller's transaction."""
        if held_since is not None and (src is JobState.RELEASING or dst in TERMINAL):
            pipe.hincrbyfloat(key, "held_s", max(now - float(held_since), 0.0))
            pipe.hdel(key, "held_since")
        elif held_since is None and endpoint_recorded and dst in MAY_HOLD:
            pipe.hset(key, "held_since", repr(now))

    def _job_keys(self, job_id: str) -> tuple[str, ...]:
        k = self.keys
        return (k.job(job_id), k.history(job_id), k.log(job_id), k.watch(job_id), k.cancel(job_id))

    def set_fields(self, job_id: str, *, owner: str, **values: str) -> None:
        """Record runtime facts (endpoint, exit code, report...) as the job's owner."""
        check_fields(values)
        key = self.keys.job(job_id)

        def txn(pipe: Any) -> None:
            cur, state, held_since = pipe.hmget(key, "owner", "state", "held_since")
            if cur is None:
                raise JobNotFound(job_id)
            if cur.decode() != owner:
                raise StaleOwner(job_id)
            now = self.clock.time()
            pipe.multi()
            pipe.hset(key, mapping={**values, "updated_at": repr(now)})
            if "endpoint" in values:
                pipe.hset(self.keys.endpoints(), values["endpoint"], job_id)
                # The runner records the endpoint the moment `colab new` returns (its assign
                # call): the held-time clock starts here, not at the STARTING transition.
                st = JobState(state.decode()) if state is not None else None
                if held_since is None and st in MAY_HOLD:
                    pipe.hset(key, "held_since", repr(now))

        watched(self.r, txn, key)

    # --- watchdog observations (not state: no owner needed) ---------------------------------

    def record_watch(self, job_id: str, fields: Mapping[str, str]) -> None:
        self.feed.record_watch(job_id, fields)

    def read_watch(self, job_id: str) -> dict[str, str]:
        raw = self.r.hgetall(self.keys.watch(job_id))
        return {k.decode(): v.decode() for k, v in raw.items()}

    # --- the VM's console, forwarded by the attach client -----------------------------------

    def forward(self, job_id: str, segment: int, items: list[ForwardItem]) -> int:
        """Append `items` past the recorded offset, atomically with the offset itself; returns
        the offset now recorded, or -1 if `segment` is not the job's current one (the script
        and its arguments are `worker.records.forward`'s, shared with the attach client)."""
        return self.feed.forward(job_id, segment, items)

    def start_segment(self, job_id: str, owner: str, segment: int) -> None:
        """Reset the console offset and the VM's sentinels for segment `segment` (as owner)."""
        keys = [self.keys.job(job_id), self.keys.watch(job_id)]
        if not self._start_segment(keys=keys, args=[owner, str(segment)]):
            raise StaleOwner(job_id)

    # --- cancel flag ------------------------------------------------------------------------

    def request_cancel(self, job_id: str, reason: str) -> None:
        """Set the job's cancel flag, and say in its history who asked, from where."""
        state, now = self.state_of(job_id), self.clock.time()
        entry = self.entry(state, now, reason or "cancelled", action="cancel")
        pipe = self.r.pipeline(transaction=True)
        pipe.set(self.keys.cancel(job_id), reason or "cancelled")
        pipe.rpush(self.keys.history(job_id), entry)
        events.append(pipe, self.keys, self.retention_s, job_id, "cancel", "", entry)
        pipe.execute()

    def cancel(self, job_id: str, reason: str) -> bool:
        """Set the cancel flag; a job no live runner holds (its lock absent) and that holds no
        session ends CANCELLED at once, whatever its owner field says (`unheld`). Returns True
        if it ended now, False if its runner (or adopter) sees the flag and stops the session."""
        self.request_cancel(job_id, reason)
        return cancel_unheld(self, job_id, reason)

    def cancel_requested(self, job_id: str) -> str | None:
        return self.feed.cancel_requested(job_id)

    # --- log stream -------------------------------------------------------------------------

    def append_log(self, job_id: str, text: str, stream: str = "out") -> str:
        results = self._append(job_id, [text], stream)
        entry_id = results[0]
        return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)

    def append_logs(self, job_id: str, texts: list[str], stream: str) -> None:
        """Several lines in one round trip (in order)."""
        self._append(job_id, texts, stream)

    def _append(self, job_id: str, texts: list[str], stream: str) -> list[Any]:
        # Every append renews the stream's retention, so lines forwarded after the job turned
        # terminal (a late client) never leave a stream that lives forever.
        key = self.keys.log(job_id)
        pipe = self.r.pipeline(transaction=False)
        for text in texts:
            pipe.xadd(
                key, {"line": text, "stream": stream}, maxlen=self.log_maxlen, approximate=True
            )
        pipe.expire(key, int(self.retention_s))
        return list(pipe.execute())

    def read_log(
        self, job_id: str, after: str = "0-0", *, count: int = 1000, block_ms: int | None = None
    ) -> list[LogLine]:
        if block_ms is None:
            rows = self.r.xrange(self.keys.log(job_id), min=f"({after}", count=count)
        else:
            res = self.r.xread({self.keys.log(job_id): after}, count=count, block=block_ms)
            rows = res[0][1] if res else []
        return [
            LogLine(
                i.decode(), f[b"line"].decode(errors="replace"), f.get(b"stream", b"out").decode()
            )
            for i, f in rows
        ]
