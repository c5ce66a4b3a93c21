"""The janitor's real side effects, built from the settings of the host it runs on (a beat host
needs the account's Colab credentials and the worker settings, nothing else).

- the account: `colab sessions` with the janitor's own CLI state (every line is then `[?]`;
  colabq tells its sessions apart by the endpoints it recorded); which account it is (`colab
  whoami`, checked against COLABQ_ACCOUNT) and its balance (`colab usage`, for `colabq usage`);
- an orphan's stop: a CLI record for the owned name at the recorded endpoint in a folder of the
  janitor's, the results recovered first if the VM holds their only copy, then the verified stop;
- an adoption: `colabq adopt JOB` started detached (it runs until the job ends; a pass never
  waits for a job);
- a resend: the job's own message, under its own id, to its GPU queue, through the app of
  whoever runs the pass (passed in: this module never imports the app, whose worker runs it);
- the queues: which jobs' messages wait in them (the broker's Redis lists);
- the trackers: MLflow and W&B clients for the settings this host has (their credentials are
  files on this host; building them calls nothing).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import redis

from worker.accounts.balances import record_usage
from worker.accounts.login import host_account
from worker.clock import SystemClock
from worker.colab.driver import ColabCli, ServerSession
from worker.colab.records import write_adoption_record
from worker.colab.release import release_session
from worker.deps import driver_at
from worker.errors import ColabqError, refuse
from worker.fleet.dispatch import jobs_of_task
from worker.janitor.beats import watchdog_lost_after_s
from worker.janitor.run import JanitorDeps
from worker.janitor.snapshot import JobView
from worker.records import ids
from worker.records.keys import queue_lists
from worker.records.ledger import Ledger
from worker.session.owner import read_token
from worker.session.plan import remote_job_dir
from worker.session.recovery import recover_results
from worker.settings import Settings
from worker.spec import Gpu, JobSpec, queue_for
from worker.store.artifacts import Verification
from worker.store.build import build_store
from worker.tracker.clients import clients_from

if TYPE_CHECKING:
    from celery import Celery


def janitor_dir(settings: Settings) -> Path:
    return settings.state_dir / "janitor"


def build_janitor_deps(
    settings: Settings, ledger: Ledger, *, send_with: Callable[[], Celery]
) -> JanitorDeps:
    """`send_with` gives the Celery app a resend goes through, called only when a job is sent
    again (the janitor task's own app; the command's, built then)."""
    token = read_token(settings.hf_token_file)
    home = janitor_dir(settings)
    endpoint = settings.hub_endpoint()

    def verify(spec: JobSpec) -> Verification:
        return build_store(spec.artifact, endpoint=endpoint, token=token).verify(spec)

    def location(spec: JobSpec) -> str:
        return build_store(spec.artifact, endpoint=endpoint, token=token).location(spec)

    def console_tail(spec: JobSpec, segment: int, offset: int) -> bytes | None:
        store = build_store(spec.artifact, endpoint=endpoint, token=token)
        return store.console_tail(spec, segment, offset)

    def listing() -> ColabCli:
        home.mkdir(parents=True, exist_ok=True)
        return driver_at(settings, home / "colab-sessions.json")

    def account() -> list[ServerSession]:
        return listing().sessions()

    def me(remote: bool) -> str | None:
        # Asked of the CLI itself when remote calls are allowed: a janitor on another login
        # than COLABQ_ACCOUNT says so (one line) instead of passing for that account.
        return host_account(settings, listing()) if remote else settings.account

    def note_usage(account: str) -> None:
        with contextlib.suppress(ColabqError, redis.RedisError):
            record_usage(ledger.r, ledger.keys, account, listing().usage(),
                         by=f"janitor@{socket.gethostname()}", now=time.time())  # fmt: skip

    def stop_orphan(job: JobView, endpoint: str) -> str:
        rec = ledger.get(job.job_id)
        name = rec.get("session")
        if not name:
            return "no session name recorded: left for a person"
        if ids.owned_session(name, settings.session_prefix) is None:
            return f"session {ids.shown(name)} is not one of colabq's: left for a person"
        folder = home / "jobs" / (ids.job_id(job.job_id) or refuse("job id", "a job", job.job_id))
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "colab-sessions.json"
        write_adoption_record(
            config, name, endpoint, accelerator=rec.spec.gpu.value, high_mem=rec.spec.high_mem
        )
        d = driver_at(settings, config)
        notes: list[str] = []
        if job.final_upload == "failed" and not job.results_local:
            got = recover_results(
                d, name, remote_job_dir(job.job_id), folder / "results",
                log=notes.append, lock_path=folder / "recover.lock",
            )  # fmt: skip
            if not got.ok:
                return (
                    f"NOT stopped: the VM holds the only copy and recovery failed ({got.summary()})"
                )
            notes.append(got.summary())
        outcome = release_session(
            d, name, endpoint, clock=SystemClock(), log=notes.append,
            attempts=settings.release_attempts, backoff_s=settings.release_backoff_s,
        )  # fmt: skip
        from worker.records.events import note_action

        note_action(ledger, job.job_id, "janitor-stop", f"orphan {endpoint}: {outcome.value}")
        return "; ".join([*notes[-1:], outcome.value])

    def adopt(job_id: str) -> str:
        job_id = ids.job_id(job_id) or refuse("job id", "a job to adopt", job_id)
        home.mkdir(parents=True, exist_ok=True)
        with open(home / f"adopt-{job_id}.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "producer.cli", "adopt", job_id],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                env=dict(os.environ),
            )  # fmt: skip
        return f"adopter pid {proc.pid}"

    def resend(spec: JobSpec) -> str:
        from worker.fleet.dispatch import send_job

        return f"to {', '.join(send_job(send_with(), spec, settings.queue_prefix))}"

    def queued_ids() -> set[str]:
        return waiting_job_ids(ledger, settings.queue_prefix)

    return JanitorDeps(
        ledger=ledger, verify=verify, location=location, account=account,
        stop_orphan=stop_orphan, adopt=adopt, resend=resend, queued_ids=queued_ids,
        watchdog_stale_s=watchdog_stale_after_s(settings), orphan_grace_s=settings.orphan_grace_s,
        stranded_grace_s=settings.stranded_grace_s, trackers=clients_from(settings),
        delete_ghosts=settings.tracker_delete_ghosts, me=me, note_usage=note_usage,
        console_tail=console_tail,
        session_prefix=settings.session_prefix, reconcile_keys=settings.janitor_reconcile_keys,
    )  # fmt: skip


def watchdog_stale_after_s(settings: Settings) -> float:
    """When a watchdog's beat is missed: the setting if given, else derived from its poll."""
    return settings.watchdog_stale_s or watchdog_lost_after_s(settings.watchdog_poll_s)


def waiting_job_ids(ledger: Ledger, queue_prefix: str) -> set[str]:
    """Ids of the tasks whose messages wait in the GPU queues (one round trip)."""
    lists = [name for g in Gpu for name in queue_lists(queue_for(g, queue_prefix))]
    pipe = ledger.r.pipeline(transaction=False)
    for name in lists:
        pipe.lrange(name, 0, -1)
    found: set[str] = set()
    for messages in pipe.execute(raise_on_error=False):
        for raw in messages if isinstance(messages, list) else ():
            try:
                task_id = json.loads(raw)["headers"]["id"]
            except (ValueError, KeyError, TypeError):
                continue
            found |= jobs_of_task(task_id)  # a fallback type's copy names its job too
    return found
