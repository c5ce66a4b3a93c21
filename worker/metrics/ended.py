"""What ended jobs add up to, kept where a job ends: one script queued in the ledger's terminal
transition (`Ledger.transition`, the one writer of every ending: a runner's, a janitor's
settlement, a cancel of a job no runner holds), so the counts commit with the state change and a
scrape reads one hash however many jobs there were (`Keys.metrics_ended`).

Per job it adds: 1 to its final state's count, its GPU-seconds held and compute units (its final
report's `duration.held_s` and `compute_units.units` as the report says them, else its record's,
as `colabq usage` counts them) by GPU, account and user; and, when it was ever claimed, one
observation to each histogram by GPU: its wait (submission to `claimed_at`, the claim that
started its last run, which the claim writes) and its run (that claim to its end), so wait + run
is the elapsed time `status` shows. The script's writes use `redis.pcall` on a key it does not
declare (as `worker.flow.deps` does): a user whose ACL rules predate the key ends her own job all
the same, uncounted, and a metrics write never fails a transition.

Fields: `jobs|STATE|GPU|ACCOUNT|USER`, `held|GPU|ACCOUNT|USER`, `units|GPU|ACCOUNT|USER`,
`wait|GPU|LE` and `run|GPU|LE` (per-bucket counts, LE a bound or `+Inf`), `wait_sum|GPU`,
`run_sum|GPU`. `read_ended` decodes them, skipping (and counting) any that does not parse.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from worker.colab import rates
from worker.metrics import labels
from worker.records.keys import Keys
from worker.states import JobState

# Bucket bounds (s). A bound dropped later still counts: buckets are stored one by one and
# made cumulative at read time over whatever bounds were stored.
WAIT_BOUNDS_S = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400)
RUN_BOUNDS_S = (5, 15, 30, 60, 300, 600, 1800, 3600, 7200, 14400, 28800, 43200, 86400, 172800)
HISTOGRAMS = ("wait", "run")
_STATES = frozenset(s.value for s in JobState)

# Add to fields of a hash. ARGV: the hash, then (i: HINCRBY | f: HINCRBYFLOAT, field, amount)...
ADD_SCRIPT = """
for i = 2, #ARGV, 3 do
  redis.pcall(ARGV[i] == 'i' and 'HINCRBY' or 'HINCRBYFLOAT', ARGV[1], ARGV[i + 1], ARGV[i + 2])
end
return 1
"""


@dataclass(frozen=True)
class Ended:
    """One job's ending as the counters take it (labels cleaned; times in seconds)."""

    state: str
    gpu: str
    account: str
    user: str
    held_s: float
    units: float
    wait_s: float | None = None  # None: never claimed
    run_s: float | None = None

    def additions(self) -> list[tuple[str, str, str]]:
        """(i|f, field, amount) for `ADD_SCRIPT`."""
        who = labels.SEP.join((self.gpu, self.account, self.user))
        out = [("i", f"jobs|{self.state}|{who}", "1"), ("f", f"held|{who}", repr(self.held_s)),
               ("f", f"units|{who}", repr(self.units))]  # fmt: skip
        for name, value, bounds in (("wait", self.wait_s, WAIT_BOUNDS_S),
                                    ("run", self.run_s, RUN_BOUNDS_S)):  # fmt: skip
            if value is not None:
                le = next((str(b) for b in bounds if value <= b), "+Inf")
                out += [("i", f"{name}|{self.gpu}|{le}", "1"),
                        ("f", f"{name}_sum|{self.gpu}", repr(value))]  # fmt: skip
        return out


def _finite(x: float | None) -> float:
    return x if x is not None and math.isfinite(x) and x > 0 else 0.0


def _time(text: str | None) -> float | None:
    try:
        t = float(text) if text else math.nan
    except ValueError:
        return None
    return t if math.isfinite(t) else None


def ended_facts(
    raw: Mapping[bytes, bytes], extra: Mapping[str, str], dst: JobState, now: float
) -> Ended:
    """The ending of the job whose record was `raw` before the transition that writes `extra`
    and moves it to `dst` at `now` (pure; a damaged field counts as nothing)."""

    def get(name: str) -> str | None:
        if name in extra:
            return extra[name]
        value = raw.get(name.encode())
        return None if value is None else value.decode(errors="replace")

    gpu = get("gpu") or ""
    try:
        costs = rates.report_costs(json.loads(get("report") or "null"))
    except ValueError:
        costs = None
    if costs is None:
        try:
            held = rates.held_s({"held_s": get("held_s"), "held_since": get("held_since")}, now)
        except ValueError:
            held = 0.0
        costs = held, rates.units(gpu, held) or 0.0
    created, claimed = _time(get("created_at")), _time(get("claimed_at"))
    # A job that ends while QUEUED (cancelled, put back then failed) did not run.
    ran = created is not None and claimed is not None and get("state") != JobState.QUEUED.value
    return Ended(
        dst.value, labels.gpu(gpu), labels.clean(get("account")), labels.clean(get("user")),
        _finite(costs[0]), _finite(costs[1]),
        _finite(claimed - created) if ran else None,  # type: ignore[operator]
        _finite(now - claimed) if ran else None,  # type: ignore[operator]
    )  # fmt: skip


def record_ended(pipe: Any, keys: Keys, e: Ended) -> None:
    """Queue the ending's counters on `pipe` (the transition's transaction): one command."""
    pipe.eval(ADD_SCRIPT, 0, keys.metrics_ended(), *(x for a in e.additions() for x in a))


@dataclass(frozen=True)
class Histogram:
    """One GPU type's histogram: per-bucket counts by upper bound (`inf` last), and the sum."""

    buckets: Mapping[float, int]
    sum_s: float

    def cumulative(self, bounds: tuple[int, ...]) -> list[tuple[float, int]]:
        """(le, observations at or below it) for `bounds`, every stored bound and `+Inf`."""
        les = sorted({float(b) for b in bounds} | set(self.buckets) | {math.inf})
        running, out = 0, []
        for le in les:
            running += self.buckets.get(le, 0)
            out.append((le, running))
        return out

    @property
    def count(self) -> int:
        return sum(self.buckets.values())


@dataclass
class EndedTotals:
    jobs: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    held_s: dict[tuple[str, str, str], float] = field(default_factory=dict)
    units: dict[tuple[str, str, str], float] = field(default_factory=dict)
    histograms: dict[str, dict[str, Histogram]] = field(default_factory=dict)
    skipped: int = 0  # fields that did not parse


def read_ended(raw: Mapping[bytes, bytes]) -> EndedTotals:
    """Decode the hash (`HGETALL`); labels are cleaned again and capped."""
    out = EndedTotals()
    buckets: dict[str, dict[str, dict[float, int]]] = {h: {} for h in HISTOGRAMS}
    sums: dict[str, dict[str, float]] = {h: {} for h in HISTOGRAMS}
    users, accounts = labels.Capped(), labels.Capped()

    def who(p: list[str]) -> tuple[str, str, str]:
        return labels.gpu(p[0]), accounts(labels.clean(p[1])), users(labels.clean(p[2]))

    for key, value in raw.items():
        name, _, rest = key.decode(errors="replace").partition(labels.SEP)
        try:
            number = _count(value)
            if name == "jobs" and (p := labels.split(rest, 4)) and p[0] in _STATES:
                k4 = (p[0], *who(p[1:]))
                out.jobs[k4] = out.jobs.get(k4, 0) + int(number)
            elif name in ("held", "units") and (p := labels.split(rest, 3)):
                into = out.held_s if name == "held" else out.units
                into[who(p)] = into.get(who(p), 0.0) + number
            elif name in HISTOGRAMS and (p := labels.split(rest, 2)):
                per = buckets[name].setdefault(labels.gpu(p[0]), {})
                le = _count(p[1], bound=True)  # a bound, or "+Inf"
                per[le] = per.get(le, 0) + int(number)
            elif name.endswith("_sum") and name[:-4] in HISTOGRAMS:
                g = labels.gpu(rest)
                sums[name[:-4]][g] = sums[name[:-4]].get(g, 0.0) + number
            else:
                raise ValueError(key)
        except ValueError:
            out.skipped += 1
    for h in HISTOGRAMS:
        gpus = set(buckets[h]) | set(sums[h])
        out.histograms[h] = {
            g: Histogram(buckets[h].get(g, {}), sums[h].get(g, 0.0)) for g in sorted(gpus)
        }
    return out


def _count(raw: bytes | str, *, bound: bool = False) -> float:
    """A stored number: finite and not negative (`+Inf` only as a bucket's bound)."""
    number = float(raw)
    if math.isnan(number) or number < 0 or (math.isinf(number) and not bound):
        raise ValueError(raw)
    return number
