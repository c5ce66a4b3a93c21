"""The metric families of one scrape, built from what it read (pure: `Scrape` in, families out).

Names: colabq's own are `colabq_*`; where one means what a celery-exporter metric means it takes
that metric's name and label names: `celery_queue_length{queue_name}` (messages waiting in a GPU
queue), `celery_worker_up{hostname}` (a live worker), `celery_worker_tasks_active{hostname}` (the
job it holds), `celery_active_worker_count{queue_name}` (live workers consuming the queue). Labels
are bounded: GPU type, account, user, state (and a worker's name, as celery-exporter's); a job id
only when `job_labels` is asked for (`COLABQ_METRICS_JOB_LABELS`): then each running job's
progress and projected end too; without, the count of jobs projected past their time limit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from worker.metrics import labels
from worker.metrics.ended import RUN_BOUNDS_S, WAIT_BOUNDS_S
from worker.metrics.scrape import Scrape
from worker.progress.limit import overrun
from worker.states import JobState

WORKER_STATES = ("idle", "busy", "drained")


@dataclass(frozen=True)
class Options:
    floor_for: Callable[[str], float]  # an account's budget floor (units)
    job_labels: bool = False


def families(s: Scrape, opts: Options) -> Iterator[Metric]:
    yield from _live(s)
    yield from _beats(s)
    yield _overruns(s)
    yield from _ended(s)
    yield from _accounts(s, opts)
    yield from _workers(s)
    yield from _actions(s)
    if opts.job_labels:
        yield from _per_job(s)


def _live(s: Scrape) -> Iterator[Metric]:
    accounts, users = labels.Capped(), labels.Capped()
    by_state: dict[tuple[str, str, str, str], int] = {}
    depth = dict.fromkeys(labels.GPUS, 0)
    oldest: dict[str, float] = {}
    for job in s.live.values():
        k = (job.state.value, job.gpu, accounts(job.account), users(job.user))
        by_state[k] = by_state.get(k, 0) + 1
        if job.state is JobState.QUEUED:
            depth[job.gpu] = depth.get(job.gpu, 0) + 1
            oldest[job.gpu] = min(oldest.get(job.gpu, math.inf), job.created_at)
    g = GaugeMetricFamily("colabq_jobs", "Jobs not yet ended, by state.",
                          labels=["state", "gpu", "account", "user"])  # fmt: skip
    for k, n in sorted(by_state.items()):
        g.add_metric(list(k), n)
    yield g
    d = GaugeMetricFamily("colabq_queue_depth", "QUEUED jobs by GPU type.", labels=["gpu"])
    w = GaugeMetricFamily("colabq_queue_oldest_wait_seconds",
                          "Seconds since the oldest QUEUED job of the GPU type was submitted "
                          "(0: none queued).", labels=["gpu"])  # fmt: skip
    for gpu, n in sorted(depth.items()):
        d.add_metric([gpu], n)
        w.add_metric([gpu], max(s.now - oldest[gpu], 0.0) if gpu in oldest else 0.0)
    yield d
    yield w
    q = GaugeMetricFamily("celery_queue_length", "Messages waiting in the GPU queue.",
                          labels=["queue_name"])  # fmt: skip
    for name, n in sorted(s.queues.items()):
        q.add_metric([name], n)
    yield q


def _beats(s: Scrape) -> Iterator[Metric]:
    accounts = labels.Capped()
    age: dict[tuple[str, str], float] = {}
    for job_id, beat in s.beats.items():
        job = s.live[job_id]
        where = (job.gpu, accounts(job.account))
        age[where] = max(age.get(where, 0.0), max(s.now - beat, 0.0))
    yield _by_gpu_account(
        "colabq_vm_heartbeat_age_seconds",
        "Seconds since the watchdog of a job holding a VM last recorded its heartbeat (after "
        "its poll of the VM), the oldest by GPU type and account.", age,
    )  # fmt: skip


def _overruns(s: Scrape) -> Metric:
    accounts = labels.Capped()
    count: dict[tuple[str, str], float] = {}
    for job_id, (reading, limit) in s.progress.items():
        job = s.live[job_id]
        if job.state is JobState.RUNNING and overrun(reading, limit) is not None:
            where = (job.gpu, accounts(job.account))
            count[where] = count.get(where, 0) + 1
    return _by_gpu_account(
        "colabq_jobs_projected_overrun",
        "Running jobs whose rate projects their end past their own time limit (what the "
        "overrun warning says), by GPU type and account.", count,
    )  # fmt: skip


def _by_gpu_account(name: str, doc: str, values: dict[tuple[str, str], float]) -> Metric:
    g = GaugeMetricFamily(name, doc, labels=["gpu", "account"])
    for where, v in sorted(values.items()):
        g.add_metric(list(where), v)
    return g


def _ended(s: Scrape) -> Iterator[Metric]:
    e = s.ended
    n = CounterMetricFamily("colabq_jobs_ended", "Jobs ended, by final state.",
                            labels=["state", "gpu", "account", "user"])  # fmt: skip
    for k4, count in sorted(e.jobs.items()):
        n.add_metric(list(k4), count)
    yield n
    for name, doc, values in (
        ("colabq_gpu_held_seconds", "GPU-seconds held by ended jobs (their final reports).",
         e.held_s),
        ("colabq_compute_units", "Compute units spent by ended jobs (their final reports).",
         e.units),
    ):  # fmt: skip
        c = CounterMetricFamily(name, doc, labels=["gpu", "account", "user"])
        for k3, v in sorted(values.items()):
            c.add_metric(list(k3), v)
        yield c
    for hist, doc, bounds in (
        ("wait", "Seconds from submission to the claim that started the job's last run.",
         WAIT_BOUNDS_S),
        ("run", "Seconds from that claim to the job's end.", RUN_BOUNDS_S),
    ):  # fmt: skip
        h = HistogramMetricFamily(f"colabq_job_{hist}_seconds", doc, labels=["gpu"])
        for gpu, got in e.histograms.get(hist, {}).items():
            buckets = [(_le(le), float(c)) for le, c in got.cumulative(bounds)]
            h.add_metric([gpu], buckets, sum_value=got.sum_s)
        yield h


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(float(bound))


def _accounts(s: Scrape, opts: Options) -> Iterator[Metric]:
    bal = GaugeMetricFamily("colabq_account_balance_units",
                            "The account's compute-unit balance, as a host last saw it.",
                            labels=["account"])  # fmt: skip
    floor = GaugeMetricFamily("colabq_account_balance_floor_units",
                              "The balance at or below which the account allocates nothing.",
                              labels=["account"])  # fmt: skip
    age = GaugeMetricFamily("colabq_account_balance_age_seconds",
                            "Seconds since a host of the account read its balance.",
                            labels=["account"])  # fmt: skip
    capped = labels.Capped()
    for name, b in sorted(s.balances.items()):
        account = capped(labels.clean(name))
        bal.add_metric([account], b.balance_units)
        floor.add_metric([account], opts.floor_for(name))
        age.add_metric([account], max(s.now - b.at, 0.0))
    yield from (bal, floor, age)


def _workers(s: Scrape) -> Iterator[Metric]:
    up = GaugeMetricFamily("celery_worker_up", "A live worker (its card is fresh).",
                           labels=["hostname"])  # fmt: skip
    active = GaugeMetricFamily("celery_worker_tasks_active", "Jobs the worker holds now.",
                               labels=["hostname"])  # fmt: skip
    drained = GaugeMetricFamily(
        "colabq_worker_drained", "A live worker that takes no job: manual (colabq drain) or "
        "host (a host failure, probed until healthy), and why.",
        labels=["hostname", "account", "kind", "reason"],
    )  # fmt: skip
    consuming = dict.fromkeys(s.queues, 0)
    by_gpu: dict[tuple[str, str, str], int] = {}
    for v in s.workers:
        c, name, account = v.card, labels.clean(v.card.name), labels.clean(v.card.account)
        up.add_metric([name], 1)
        active.add_metric([name], 1 if c.busy else 0)
        state = "drained" if v.health else "busy" if c.busy else "idle"
        for gpu in {labels.gpu(g) for g in c.gpus}:
            by_gpu[(gpu, account, state)] = by_gpu.get((gpu, account, state), 0) + 1
        if v.health is not None:
            kind = "manual" if v.health.manual else "host"
            drained.add_metric([name, account, kind, labels.text(v.health.reason)], 1)
        else:
            for queue in set(c.queues) & set(consuming):
                consuming[queue] += 1
    count = GaugeMetricFamily("celery_active_worker_count",
                              "Live workers consuming the queue (drained ones do not).",
                              labels=["queue_name"])  # fmt: skip
    for queue, n in sorted(consuming.items()):
        count.add_metric([queue], n)
    workers = GaugeMetricFamily("colabq_workers",
                                "Live workers by a GPU type they serve, and their state.",
                                labels=["gpu", "account", "state"])  # fmt: skip
    for k, n in sorted(by_gpu.items()):
        workers.add_metric(list(k), n)
    yield from (up, active, count, workers, drained)


def _actions(s: Scrape) -> Iterator[Metric]:
    for name, doc, values, names in (
        ("colabq_janitor_actions", "What janitor passes did: orphan_stopped, adopted, settled, "
         "resent, ghost_run_closed, failed.", s.janitor, ["account", "action"]),
        ("colabq_notify_failures", "Notifications given up on after their retries.", s.notify,
         ["target", "state"]),
    ):  # fmt: skip
        c = CounterMetricFamily(name, doc, labels=names)
        for k, n in sorted(values.items()):
            c.add_metric(list(k), n)
        yield c
    skipped = GaugeMetricFamily(
        "colabq_metrics_skipped", "Counter fields and records this scrape could not read."
    )
    skipped.add_metric([], s.skipped)
    yield skipped


def _per_job(s: Scrape) -> Iterator[Metric]:
    info = GaugeMetricFamily("colabq_job_info", "A job not yet ended (opt-in job labels).",
                             labels=["job_id", "state", "gpu", "account", "user"])  # fmt: skip
    restarts = GaugeMetricFamily("colabq_job_restarts", "Restarts after lost VMs so far.",
                                 labels=["job_id"])  # fmt: skip
    putbacks = GaugeMetricFamily("colabq_job_putbacks", "Times the job was given back to the "
                                 "queue (host failures, capacity).", labels=["job_id"])  # fmt: skip
    beat = GaugeMetricFamily("colabq_job_vm_heartbeat_age_seconds",
                             "Seconds since the job's watchdog last recorded its heartbeat.",
                             labels=["job_id"])  # fmt: skip
    ratio = GaugeMetricFamily("colabq_job_progress_ratio",
                              "How far the run got (0-1), as its console last said.",
                              labels=["job_id"])  # fmt: skip
    eta = GaugeMetricFamily("colabq_job_eta_timestamp_seconds",
                            "When the run ends at its measured rate (epoch s).",
                            labels=["job_id"])  # fmt: skip
    for job_id, j in sorted(s.live.items()):
        info.add_metric([job_id, j.state.value, j.gpu, j.account, j.user], 1)
        restarts.add_metric([job_id], j.restarts)
        putbacks.add_metric([job_id], j.putbacks)
        if job_id in s.beats:
            beat.add_metric([job_id], max(s.now - s.beats[job_id], 0.0))
        reading = s.progress[job_id][0] if job_id in s.progress else None
        if reading is not None and reading.fraction is not None:
            ratio.add_metric([job_id], reading.fraction)
        if reading is not None and reading.eta_at is not None:
            eta.add_metric([job_id], reading.eta_at)
    yield from (info, restarts, putbacks, beat, ratio, eta)


def ledger_up(value: int) -> Metric:
    """1: this scrape read the ledger; 0: Redis did not answer (then nothing else is said)."""
    g = GaugeMetricFamily("colabq_ledger_up", "1 if this scrape read the ledger (Redis).")
    g.add_metric([], value)
    return g
