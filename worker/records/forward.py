"""What the job's host-side observers write to Redis: the VM's console, forwarded by the attach
client, and the watchdog's observations and log lines.

Light on purpose. The attach client and the watchdog run once per held session for hours, so they
import only this (redis-py and the key names), never the contract (`worker.spec`, pydantic) nor
the settings object (pydantic-settings): the eight settings they need are read here the way
`worker.settings.Settings` reads them, and `Feed` is the part of `Ledger` they use, writing the
same keys the same way (tests hold both pairs equal). `Ledger.forward` is `forward` below.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import redis
from redis.commands.core import Script

from worker.errors import ConfigError
from worker.records.keys import Keys
from worker.records.redisconn import connect
from worker.records.sentinelurl import SentinelLogin
from worker.settingsfiles import settings_files

ENV_PREFIX = "COLABQ_"  # worker.settings' own, kept equal by a test

# Forward a batch of the VM's console lines to the job's log stream and record how far it got,
# in one atomic step. Each item carries the byte offset just past it in the VM's console log;
# an item at or before the recorded offset was forwarded already (a retried batch, a client
# that re-attached) and is skipped: every line reaches the stream exactly once. A client of an
# older segment (its VM was lost and a new one started) changes nothing.
# KEYS: watch hash, log stream. ARGV: segment, maxlen, retention (s), the items' end offsets
# (space-separated), their kinds (one letter each), their payloads joined by newlines (a console
# line never holds one), and the run's progress read from them (`worker.progress.record`; "" for
# none), stored as the watch's `exec_progress`. Seven arguments whatever the batch: encoding one
# argument per line was most of what a batch cost the client. The stream is trimmed once per
# batch (MAXLEN ~, as XADD would) and its retention renewed with every line.
# kinds: l = a line; s = a sentinel "WHAT=value"; e = the attach's end (any other is skipped:
# a bar's update, `p`, is the client's alone). A line moves the offset
# strictly forward; a sentinel or an end may sit at the offset already recorded (the attach's own
# markers take no bytes), and applying one twice changes nothing.
FORWARD_SCRIPT = """
local seg = redis.call('HGET', KEYS[1], 'segment') or '0'
if seg ~= ARGV[1] then return -1 end
local cur = tonumber(redis.call('HGET', KEYS[1], 'log_offset') or '0')
local kinds, text = ARGV[5], ARGV[6]
local added = false
local n, at = 0, 1
for word in string.gmatch(ARGV[4], '%S+') do
  n = n + 1
  local stop = string.find(text, '\\n', at, true) or (#text + 1)
  local payload = string.sub(text, at, stop - 1)
  at = stop + 1
  local pos = tonumber(word)
  local kind = string.sub(kinds, n, n)
  if pos > cur or (kind ~= 'l' and pos >= cur) then
    if kind == 'l' then
      redis.call('XADD', KEYS[2], '*', 'line', payload, 'stream', 'out')
      added = true
    elseif kind == 's' or kind == 'e' then
      local eq = string.find(payload, '=', 1, true)
      if eq then
        redis.call('HSET', KEYS[1], 'exec_' .. string.lower(string.sub(payload, 1, eq - 1)),
                   string.sub(payload, eq + 1))
      end
    end
    cur = pos
  end
end
redis.call('HSET', KEYS[1], 'log_offset', cur)
if ARGV[7] and ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'exec_progress', ARGV[7]) end
if added then
  redis.call('XTRIM', KEYS[2], 'MAXLEN', '~', ARGV[2])
  redis.call('EXPIRE', KEYS[2], ARGV[3])
end
return cur
"""


@dataclass(frozen=True)
class ForwardItem:
    """One thing read from the VM's console log, with the byte offset just past it."""

    end_offset: int
    kind: str  # "l" line, "s" sentinel ("WHAT=value"), "e" the attach's end
    payload: str


class Lines(NamedTuple):
    """A batch of items as the script takes them, three strings whatever its length (the attach
    client keeps a chatty job's backlog this way: no object per line)."""

    ends: str  # each item's end offset in decimal, separated by single spaces
    kinds: str  # one letter per item
    payloads: str  # joined by newlines: none holds one (a console line ends at one)

    @property
    def size(self) -> int:
        return len(self.kinds)

    @classmethod
    def of(cls, items: Sequence[ForwardItem]) -> Lines:
        return cls(
            " ".join([str(it.end_offset) for it in items]),
            "".join([it.kind for it in items]),
            "\n".join([it.payload for it in items]),
        )

    @classmethod
    def join(cls, batches: Sequence[Lines]) -> Lines:
        full = [b for b in batches if b.size]
        return cls(
            " ".join([b.ends for b in full]),
            "".join([b.kinds for b in full]),
            "\n".join([b.payloads for b in full]),
        )


def forward_lines(
    script: Script,
    keys: Keys,
    job_id: str,
    segment: int,
    lines: Lines,
    *,
    log_maxlen: int,
    retention_s: float,
    progress: str = "",
) -> int:
    """Append `lines` past the recorded offset, atomically with the offset itself (and the
    run's `progress` read from them, if given); returns the offset now recorded, or -1 if
    `segment` is not the job's current one."""
    n = lines.size
    if n and (lines.ends.count(" ") != n - 1 or lines.payloads.count("\n") != n - 1):
        raise ValueError("one end offset, one kind letter and one payload (no newline) per item")
    args: list[str | int] = [
        str(segment), log_maxlen, int(retention_s), lines.ends, lines.kinds, lines.payloads,
        progress,
    ]  # fmt: skip
    return int(script(keys=[keys.watch(job_id), keys.log(job_id)], args=args))


def forward(
    script: Script,
    keys: Keys,
    job_id: str,
    segment: int,
    items: Sequence[ForwardItem],
    *,
    log_maxlen: int,
    retention_s: float,
) -> int:
    """`forward_lines` for a list of items."""
    return forward_lines(
        script, keys, job_id, segment, Lines.of(items),
        log_maxlen=log_maxlen, retention_s=retention_s,
    )  # fmt: skip


# --- the settings the observers need -------------------------------------------------------


@dataclass(frozen=True)
class FeedSettings:
    """The settings an observer needs; defaults are `Settings`' (kept equal by a test)."""

    redis_url: str = "redis://127.0.0.1:6379/0"
    key_prefix: str = "colabq"
    log_stream_maxlen: int = 20_000
    retention_s: float = 30 * 24 * 3600.0
    redis_retry_s: float = 60.0
    redis_master_name: str | None = None  # read only with a sentinel:// URL
    redis_sentinel_username: str | None = None  # the sentinels' own login (idem)
    redis_sentinel_password: str | None = field(default=None, repr=False)

    def sentinel_login(self) -> SentinelLogin:
        return SentinelLogin(self.redis_sentinel_username, self.redis_sentinel_password)


def feed_settings(
    environ: Mapping[str, str] | None = None, files: Sequence[Path] | None = None
) -> FeedSettings:
    """Read as `Settings` reads them: `COLABQ_<NAME>` in any case from the environment, over
    the same in the settings files (`worker.settingsfiles`), over the defaults. The owner that
    started this process validated the same values (and passes them in the environment); this
    only converts them."""
    env = os.environ if environ is None else environ
    if files is None:
        try:
            files = settings_files(env)
        except ConfigError:
            files = ()  # the owner checked them when it started, and passed what it read
    found: dict[str, str] = {}
    if files:
        from dotenv import dotenv_values  # pydantic-settings' own reader; only when there is one

        for path in files:
            found.update({k.lower(): v for k, v in dotenv_values(path).items() if v is not None})
    found.update({k.lower(): v for k, v in env.items()})
    d = FeedSettings()

    def get(name: str, default: Any) -> Any:
        raw = found.get(f"{ENV_PREFIX.lower()}{name}")
        if default is None:
            return (raw or "").strip() or None  # an empty value is unset, as `Settings` reads it
        return default if raw is None else type(default)(raw.strip())

    return FeedSettings(
        get("redis_url", d.redis_url),
        get("key_prefix", d.key_prefix),
        get("log_stream_maxlen", d.log_stream_maxlen),
        get("retention_s", d.retention_s),
        get("redis_retry_s", d.redis_retry_s),
        get("redis_master_name", d.redis_master_name),
        get("redis_sentinel_username", d.redis_sentinel_username),
        get("redis_sentinel_password", d.redis_sentinel_password),
    )


# --- the observers' writes ------------------------------------------------------------------


class Feed:
    """The part of the ledger an observer uses; the same keys and commands as `Ledger`'s."""

    def __init__(
        self, client: redis.Redis, keys: Keys, *, log_maxlen: int, retention_s: float
    ) -> None:
        self.r: Any = client  # redis-py's stubs type replies as unions of everything
        self.keys = keys
        self.log_maxlen = log_maxlen
        self.retention_s = retention_s
        self._forward = client.register_script(FORWARD_SCRIPT)

    @classmethod
    def build(cls, s: FeedSettings, *, retry_s: float | None = None) -> Feed:
        budget_s = s.redis_retry_s if retry_s is None else retry_s
        client = connect(s.redis_url, budget_s, s.redis_master_name, s.sentinel_login())
        return cls(
            client, Keys(s.key_prefix), log_maxlen=s.log_stream_maxlen, retention_s=s.retention_s
        )

    def forward(self, job_id: str, segment: int, items: Sequence[ForwardItem]) -> int:
        return forward(
            self._forward, self.keys, job_id, segment, items,
            log_maxlen=self.log_maxlen, retention_s=self.retention_s,
        )  # fmt: skip

    def forward_lines(self, job_id: str, segment: int, lines: Lines, progress: str = "") -> int:
        return forward_lines(
            self._forward, self.keys, job_id, segment, lines,
            log_maxlen=self.log_maxlen, retention_s=self.retention_s, progress=progress,
        )  # fmt: skip

    def log_offset(self, job_id: str) -> int:
        """How far into the VM's console the job's stream holds (`Ledger.read_watch`'s)."""
        raw = self.r.hget(self.keys.watch(job_id), "log_offset")
        return int(raw or 0)

    def record_watch(self, job_id: str, fields: Mapping[str, str]) -> None:
        pipe = self.r.pipeline(transaction=True)
        pipe.hset(self.keys.watch(job_id), mapping=dict(fields))
        if "endpoint" in fields:
            pipe.hset(self.keys.endpoints(), fields["endpoint"], job_id)
        pipe.execute()

    def append_log(self, job_id: str, text: str, stream: str = "out") -> None:
        # Every append renews the stream's retention (see `Ledger._append`).
        key = self.keys.log(job_id)
        pipe = self.r.pipeline(transaction=False)
        pipe.xadd(key, {"line": text, "stream": stream}, maxlen=self.log_maxlen, approximate=True)
        pipe.expire(key, int(self.retention_s))
        pipe.execute()

    def cancel_requested(self, job_id: str) -> str | None:
        raw = self.r.get(self.keys.cancel(job_id))
        return raw.decode() if raw is not None else None
