"""Wiring: builds each side effect once per process from the settings, and passes it down.

No module-level singletons: entry points (the Celery task, the CLI, the exec client) call these.
"""

from __future__ import annotations

from pathlib import Path

import redis

from worker.clock import SystemClock
from worker.colab.driver import ColabCli
from worker.records.keys import Keys
from worker.records.ledger import Ledger
from worker.session.jobfiles import JobFiles
from worker.settings import Settings


def build_redis(settings: Settings) -> redis.Redis:
    return redis.Redis.from_url(
        settings.redis_url, socket_connect_timeout=5, socket_timeout=30, health_check_interval=30
    )


def build_ledger(settings: Settings, client: redis.Redis | None = None) -> Ledger:
    return Ledger(
        client or build_redis(settings),
        SystemClock(),
        Keys(settings.key_prefix),
        log_maxlen=settings.log_stream_maxlen,
    )


def connect_ledger(settings: Settings) -> Ledger:
    """The ledger on a Redis that answers now; otherwise one BrokerUnavailable line."""
    from worker.errors import BrokerUnavailable

    client = build_redis(settings)
    try:
        client.ping()
    except redis.RedisError as exc:
        raise BrokerUnavailable(settings.redis_url, type(exc).__name__) from None
    return build_ledger(settings, client)


def job_dir(settings: Settings, job_id: str) -> Path:
    """This worker host's folder for one job: the CLI's sessions.json, the driver, results."""
    return settings.state_dir / "jobs" / job_id


def build_driver(settings: Settings, job_id: str) -> ColabCli:
    # One CLI state file per job: no two jobs share a sessions.json, so no status call of one job
    # can race an exec of another, and a restarted worker finds the file from the job id alone.
    return ColabCli(
        settings.colab_bin,
        JobFiles(job_dir(settings, job_id)).cli_config,
        timeout_s=settings.colab_call_timeout_s,
        upload_timeout_s=settings.colab_upload_timeout_s,
    )
