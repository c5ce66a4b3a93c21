"""What a deployment's ACL rules guard: every key colabq's services write, Celery's queues,
kombu's bindings and Celery's Pub/Sub channels (the surface), each write command family a user
could try on them, and what each role's rule must answer (`ACL DRYRUN`) for each.

The keys come from `worker.records.keys.Keys` itself (every builder called with sample
arguments: an owned job of the user and of someone else, a plain job, a worker, an account, a
queue...), plus the few built elsewhere (the event log, a sweep's keys, a job's dependants set,
the operator probe), so a key added there is guarded here without a list to keep. `colabq acl
--check` (`aclcheck.py`) and the attacker tests run these probes.
"""

from __future__ import annotations

import inspect
import itertools
from dataclasses import dataclass

from worker.flow.sweeps import sweep_base
from worker.people.acl import Role, operator_probe_key
from worker.records.events import events_key
from worker.records.keys import Keys
from worker.spec import Gpu

HEX = "0123456789abcdef"
SWEEP_HEX = "sw0123456789ab"
# The write command families a user could turn against a key, as argv for `key`.
WRITES: dict[str, tuple[str, ...]] = {
    "SET": ("SET", "{k}", "x"),
    "HSET": ("HSET", "{k}", "f", "x"),
    "DEL": ("DEL", "{k}"),
    "RENAME": ("RENAME", "{k}", "{k}:x"),
    "LPUSH": ("LPUSH", "{k}", "x"),
    "ZREM": ("ZREM", "{k}", "x"),
    "SREM": ("SREM", "{k}", "x"),
    "XADD": ("XADD", "{k}", "*", "f", "x"),
    "XGROUP": ("XGROUP", "SETID", "{k}", "g", "$"),
    "EVAL": ("EVAL", "return redis.call('DEL', KEYS[1])", "1", "{k}"),
}
READS: dict[str, tuple[str, ...]] = {"GET": ("GET", "{k}"), "XRANGE": ("XRANGE", "{k}", "-", "+")}
# What no role may run, and what every role (or services and operators) must.
ADMIN = (("FLUSHALL",), ("CONFIG", "SET", "maxmemory", "0"), ("KEYS", "*"),
         ("ACL", "SETUSER", "x"), ("ACL", "GETUSER", "default"))  # fmt: skip
EVERYONE = (("ACL", "WHOAMI"), ("INFO",))
INSPECTION = (("ACL", "USERS"), ("ACL", "DRYRUN", "default", "GET", "x"))

_SAMPLES = {"worker": "celery@host1", "account": "a@example.com", "request_id": HEX * 2,
            "key": "idem-key"}  # fmt: skip


@dataclass(frozen=True)
class Surface:
    """For one user: the keys and channels only services, gates and operators may write
    (`shared`), the user's own keys (`own`), and the keys the user must read (`readable`)."""

    shared: tuple[str, ...]
    channels: tuple[str, ...]
    own: tuple[str, ...]
    readable: tuple[str, ...]


def service_keys(keys: Keys, job_ids: tuple[str, ...], sweep_ids: tuple[str, ...],
                 users: tuple[str, ...], queues: tuple[str, ...]) -> list[str]:  # fmt: skip
    """Every key colabq's services write, for these jobs, sweeps, users and queues."""
    out: list[str] = []
    for name, method in inspect.getmembers(keys, inspect.ismethod):
        if name.startswith("_") or name == "requests_user":
            continue
        params = list(inspect.signature(method).parameters)
        for args in _arguments(params, job_ids, users, queues):
            out.append(method(*args))
    out += [events_key(keys), operator_probe_key(keys.prefix)]
    out += [keys.job(j) + ":dependants" for j in job_ids]
    for sweep in sweep_ids:
        base = sweep_base(keys, sweep)
        out += [base, base + ":jobs", base + ":running", base + ":waiting"]
    return list(dict.fromkeys(out))


def _arguments(
    params: list[str], jobs: tuple[str, ...], users: tuple[str, ...], queues: tuple[str, ...]
) -> list[tuple[str | None, ...]]:
    """Every combination of sample values of a builder's parameters."""
    values: dict[str, tuple[str | None, ...]] = {
        "job_id": jobs, "user": users, "owner": (*users, None), "queue": queues,
        "account": ("", _SAMPLES["account"]),
    }  # fmt: skip
    return list(itertools.product(*(values.get(p, (_SAMPLES.get(p, "x"),)) for p in params)))


def celery_keys(queue_prefix: str) -> list[str]:
    """Celery's queues (each GPU type's, with kombu's priority lists), kombu's bindings and the
    worker's control queues."""
    queues = [f"{queue_prefix}gpu.{g.value.lower()}" for g in Gpu]
    out = [*queues, *(f"{q}\x06\x16{p}" for q in queues[:1] for p in (3, 6, 9))]
    for name in (*queues, "celeryev", "celery.pidbox", "reply.celery.pidbox", "celery"):
        out += [f"_kombu.binding.{name}", f"_kombu.binding_permanent.{name}"]
    return [*out, "celery", "unacked", "unacked_index", "unacked_mutex", "celery@host1.dq2"]


CHANNELS = ("/0.celeryev/task.multi", "/0.celeryev/worker.heartbeat", "/0.celery.pidbox/",
            "/14.celeryev/task.sent", "celeryev", "anything")  # fmt: skip


def surface(keys: Keys, queue_prefix: str, user: str, other: str,
            job_ids: tuple[str, ...] = (), sweep_ids: tuple[str, ...] = ()) -> Surface:  # fmt: skip
    """`user`'s view: the jobs and sweeps named (by default a sample of `other`'s, of `user`'s
    own, and a plain one), `other`'s requests and replies among the shared keys."""
    jobs = job_ids or (f"{HEX}.{other}", f"{HEX}.{user}", HEX)
    sweeps = sweep_ids or (f"{SWEEP_HEX}.{other}", f"{SWEEP_HEX}.{user}", SWEEP_HEX)
    queues = (f"{queue_prefix}gpu.t4",)
    everything = service_keys(keys, jobs, sweeps, (other, user), queues)
    own = (keys.requests(user), keys.reply(user, HEX * 2))
    shared = [k for k in everything if k not in own] + celery_keys(queue_prefix)
    readable = [k for k in everything if k.startswith(f"{keys.prefix}:")] + list(queues)
    return Surface(tuple(dict.fromkeys(shared)), CHANNELS, own, tuple(readable))


@dataclass(frozen=True)
class Probe:
    """One command Redis is asked about (`ACL DRYRUN`), and whether the role's rule lets it."""

    argv: tuple[str, ...]
    allowed: bool
    what: str  # the key or channel, or the command for the others


def probes(role: Role, s: Surface) -> list[Probe]:
    """Every probe of the surface, with the verdict `role`'s rule must give."""
    wide = role is not Role.USER
    out = [Probe(_argv(a, k), wide, k) for k in s.shared for a in WRITES.values()]
    out += [Probe(("PUBLISH", c, "x"), wide, c) for c in s.channels]
    out += [Probe(_argv(a, k), True, k) for k in s.own for a in WRITES.values()]
    out += [Probe(_argv(a, k), True, k) for k in s.readable for a in READS.values()]
    out += [Probe(a, False, " ".join(a[:2])) for a in ADMIN]
    out += [Probe(a, True, " ".join(a[:2])) for a in EVERYONE]
    out += [Probe(a, wide, " ".join(a[:2])) for a in INSPECTION]
    return out


def _argv(template: tuple[str, ...], key: str) -> tuple[str, ...]:
    return tuple(part.replace("{k}", key) for part in template)
