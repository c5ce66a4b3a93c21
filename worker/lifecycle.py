"""A worker process's start and stop, as Celery's signals: refuse to start on a host that would
fail every job (or whose Colab login is not its account), take back the jobs it owned before it
died, publish its card (`colabq workers`), run its fleet duties (`worker.fleet.prober`), its
account's janitor duty (`worker.janitor.duty`) and the gate's duty (`worker.gate.duty`: the
users' requests, when no other gate serves them), and withdraw them when it stops.

Imported by the worker when it starts (`worker.celery_app.WORKER_MODULES`, Celery's `include`),
never by the app's module; the heavy pieces are imported inside the handlers.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from celery.signals import worker_init, worker_ready, worker_shutdown

from worker.records import ids
from worker.settings import Settings, load_settings
from worker.tasknames import ADOPT, RUN_JOB


@worker_init.connect  # type: ignore[untyped-decorator]
def _refuse_unless_ready(sender: Any, **_: Any) -> None:
    """A host that would fail every job it takes (no `colab`, a release colabq does not drive,
    no account, an unwritable state dir, a bad token file) refuses to start, in one line; one
    that starts says which `colab` release it drives, and each warning, one line each."""
    from worker.session.checks import worker_host_check

    settings = load_settings()
    check = worker_host_check(settings)
    if check.problem is not None:
        print(f"colabq worker: not starting: {check.problem}", file=sys.stderr, flush=True)
        os._exit(2)  # before Celery consumes anything; no traceback for a known problem
    if check.cli is not None:
        print(f"colabq worker: drives {check.cli.describe()}", file=sys.stderr, flush=True)
    for warning in check.warnings:
        print(f"colabq worker: WARNING: {warning}", file=sys.stderr, flush=True)
    if settings.account is None and check.account is not None:
        # The account checked now is the one this worker records on every job it runs: its
        # pool processes fork from here and read it as their setting (one whoami per worker,
        # not one per job; a drained worker's probe compares the login with it again).
        os.environ["COLABQ_ACCOUNT"] = check.account


@worker_ready.connect  # type: ignore[untyped-decorator]
def _adopt_own_orphans(sender: Any, **_: Any) -> None:
    """A worker restarted after a crash takes back the jobs it owned (found in its state dir)."""
    from celery.utils.nodenames import worker_direct

    queues = list(sender.app.amqp.queues.consume_from or {})
    for job_id in orphans_to_adopt(load_settings(), queues):
        sender.app.send_task(ADOPT, args=[job_id], queue=worker_direct(sender.hostname))


_card_keeper: Any = None


@worker_ready.connect  # type: ignore[untyped-decorator]
def _publish_card(sender: Any, **_: Any) -> None:
    """The worker's card in Redis (`colabq workers`; `colabq submit` warns when no live worker
    serves a job's queue), renewed until the worker stops."""
    global _card_keeper
    import socket
    import time

    from celery.worker import state

    from worker.deps import build_redis
    from worker.records.fleet import CardKeeper, WorkerCard
    from worker.records.keys import Keys
    from worker.session.gitroute import reach_of

    settings = load_settings()
    gpu_prefix = f"{settings.queue_prefix}gpu."
    queues = tuple(sorted(q for q in (sender.app.amqp.queues.consume_from or {})
                          if q.startswith(gpu_prefix)))  # fmt: skip
    if not queues:
        return  # beat's janitor worker serves no GPU queue: not a worker jobs can go to
    now = time.time()
    # What its git credentials reach: `colabq submit` refuses an ssh remote no live worker
    # serving the job's queue can fetch (host names and a flag, never a secret).
    reach = reach_of(settings.git_credentials_file, settings.git_ssh_key_file)
    card = WorkerCard(
        name=sender.hostname, host=socket.gethostname(),
        gpus=tuple(q.removeprefix(gpu_prefix).upper() for q in queues), queues=queues,
        job_id=None, beat_at=now, started_at=now, account=settings.account or "",
        git_hosts=reach.hosts, git_ssh_key=reach.ssh_key,
    )  # fmt: skip

    def current_job() -> str | None:
        for req in list(state.active_requests):
            if req.task_name == RUN_JOB:
                # The copy's own job: its message's spec says it (a task id may read two ways).
                return _job_of_message(req.args)
            if req.task_name == ADOPT and req.args:
                return ids.job_id(req.args[0])
        return None

    client = build_redis(settings, retry_s=0)  # a beat skipped in an outage; the card lives on
    _card_keeper = CardKeeper(client, Keys(settings.key_prefix), card, current_job)
    _card_keeper.start()
    _start_prober(sender, settings, queues)
    _start_gate(sender, settings)


_prober: Any = None


def _start_prober(sender: Any, settings: Settings, queues: tuple[str, ...]) -> None:
    """The worker's fleet duties (`worker.fleet.prober`): due capacity retries sent, a
    drained worker probed until healthy, and its account's janitor duty."""
    global _prober
    from celery.utils.nodenames import worker_direct

    from worker.deps import build_ledger
    from worker.fleet.prober import Prober
    from worker.session.checks import worker_host_problem
    from worker.session.owner import find_orphaned

    def adopt(job_id: str) -> None:
        sender.app.send_task(ADOPT, args=[job_id], queue=worker_direct(sender.hostname))

    ledger = build_ledger(settings, retry_s=0)
    duty = _janitor_duty(sender, settings, ledger)
    _prober = Prober(
        sender.app, settings, ledger, sender.hostname, queues, worker_host_problem,
        orphans=lambda: find_orphaned(settings, handed_over=False), adopt=adopt,
        duty=duty.tick if duty is not None else lambda now: None,
    )  # fmt: skip
    _prober.start()


_gate: Any = None


def _start_gate(sender: Any, settings: Settings) -> None:
    """The gate's duty (`worker.gate.duty`): this worker serves the users' requests while it
    holds the gate's lease, so a deployment with one worker needs no `colabq gate`."""
    global _gate
    from worker.deps import build_ledger
    from worker.gate.duty import build_gate_duty

    def say(line: str) -> None:
        print(line, flush=True)

    ledger = build_ledger(settings, retry_s=0)  # its own connection: its reads block
    _gate = build_gate_duty(settings, ledger, sender.app, say)
    _gate.start()


def _janitor_duty(sender: Any, settings: Settings, ledger: Any) -> Any:
    """The account's janitor duty (`worker.janitor.duty`): this worker runs its account's pass
    where no beat or other host has lately."""
    from worker.janitor.duty import JanitorDuty
    from worker.janitor.run import janitor_pass
    from worker.janitor.wiring import build_janitor_deps

    if settings.account is None:
        return None  # a worker always has one (checked at start): nothing to reconcile without
    deps = build_janitor_deps(settings, ledger, send_with=lambda: sender.app)
    return JanitorDuty(
        ledger, sender.hostname, settings.account, settings.janitor_interval_s,
        lambda within_s: janitor_pass(deps, dry_run=False, unless_ran_within_s=within_s),
    )  # fmt: skip


@worker_shutdown.connect  # type: ignore[untyped-decorator]
def _withdraw_card(**_: Any) -> None:
    if _card_keeper is not None:
        _card_keeper.stop()
    if _prober is not None:
        _prober.stop()
    if _gate is not None:
        _gate.close()


def _job_of_message(args: Any) -> str | None:
    """The job id a run_job message's spec names, if it is one."""
    import json

    try:
        return ids.job_id(json.loads(args[0]).get("job_id"))
    except (ValueError, TypeError, IndexError, KeyError, AttributeError):
        return None


def orphans_to_adopt(settings: Settings, queues: list[str]) -> list[str]:
    """At a worker's start: its own unfinished jobs, if it serves GPU queues (the beat's
    janitor worker does not: it must stay free for the janitor)."""
    from worker.session.owner import find_orphaned

    if not any(".gpu." in f".{q}" or q.startswith("gpu.") for q in queues):
        return []
    return find_orphaned(settings)
