"""Wiring: builds each side effect once per process from the settings, and passes it down.

No module-level singletons: entry points (the Celery task, the CLI) call these; the exec client
and the watchdog build their Redis client with `worker.records.redisconn` (this module's too).
"""

from __future__ import annotations

from pathlib import Path

import redis

from worker.clock import SystemClock
from worker.colab.driver import ColabCli
from worker.errors import refuse
from worker.records import ids
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.records.redisconn import connect
from worker.session.jobfiles import JobFiles
from worker.settings import Settings


def build_redis(settings: Settings, *, retry_s: float | None = None) -> redis.Redis:
    """A client whose every call survives an outage of `retry_s` (default: the settings')."""
    budget_s = settings.redis_retry_s if retry_s is None else retry_s
    return connect(
        settings.redis_url, budget_s, settings.redis_master_name, settings.sentinel_login()
    )


def build_ledger(
    settings: Settings, client: redis.Redis | None = None, *, retry_s: float | None = None
) -> Ledger:
    return Ledger(
        client or build_redis(settings, retry_s=retry_s),
        SystemClock(),
        Keys(settings.key_prefix),
        log_maxlen=settings.log_stream_maxlen,
        retention_s=settings.retention_s,
        quota_tz=settings.quota_timezone,
    )


def connect_ledger(settings: Settings) -> Ledger:
    """The ledger on a Redis that answers now; otherwise one BrokerUnavailable line (which
    login was refused, when one was). For commands people run: a dead Redis is reported
    within a second or two, not retried."""
    from worker.errors import BrokerUnavailable
    from worker.records.sentinels import login_refusal

    client = build_redis(settings, retry_s=1.0)
    try:
        client.ping()
    except redis.RedisError as exc:
        login = settings.sentinel_login()
        refused = login_refusal(exc, settings.redis_url, settings.redis_master_name, login)
        raise refused or BrokerUnavailable(settings.redis_url, type(exc).__name__) from None
    return build_ledger(settings, client)


def job_dir(settings: Settings, job_id: str) -> Path:
    """This worker host's folder for one job: the CLI's sessions.json, the driver, results.
    UntrustedValue for anything but a job id: no other name ever becomes a path here."""
    return settings.state_dir / "jobs" / (ids.job_id(job_id) or refuse("job id", "a job", job_id))


def driver_at(settings: Settings, config: Path) -> ColabCli:
    """The `colab` CLI with this host's settings, on the CLI state file `config`."""
    return ColabCli(
        settings.colab_bin,
        config,
        timeout_s=settings.colab_call_timeout_s,
        upload_timeout_s=settings.colab_upload_timeout_s,
        assign=settings.assign_policy(),
        new_margin_s=settings.colab_new_margin_s,
    )


def build_driver(settings: Settings, job_id: str) -> ColabCli:
    # One CLI state file per job: no two jobs share a sessions.json, so no status call of one job
    # can race an exec of another, and a restarted worker finds the file from the job id alone.
    return driver_at(settings, JobFiles(job_dir(settings, job_id)).cli_config)
