"""The one settings object of colabq (pydantic-settings, `COLABQ_` prefix, `.env` supported).

Built once at an entry point (`Settings()`), never at import time, and passed down. Invalid
values fail at start-up with the field named. Secrets are not settings values: the Hub token is a
0600 file whose *path* is a setting, read only by the runner on the worker host.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from worker.errors import ConfigError


def _default_state_dir() -> Path:
    return Path.home() / ".local" / "state" / "colabq"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="COLABQ_", env_file=".env", extra="ignore", frozen=True
    )

    redis_url: str = "redis://127.0.0.1:6379/0"
    # Every Redis key colabq writes starts with this, so one Redis can host several deployments.
    key_prefix: str = "colabq"
    # Queues are `<queue_prefix>gpu.<type>`: a prefix keeps deployments (or a demo, or a test)
    # sharing one Redis database from taking each other's jobs.
    queue_prefix: str = ""
    colab_bin: str = "colab"
    colab_version: str = "0.7.4"
    # Worker-local state: the CLI's per-slot sessions.json, job work dirs, recovered results.
    state_dir: Path = Field(default_factory=_default_state_dir)
    colab_call_timeout_s: float = Field(default=30.0, gt=0)
    colab_upload_timeout_s: float = Field(default=600.0, gt=0)
    # Sessions are proven ours by this prefix plus 128 random bits.
    session_prefix: str = "colabq-"
    hf_token_file: Path | None = None
    poll_interval_s: float = Field(default=2.0, gt=0)
    # The watchdog polls this often (the original used 15 s; each poll may call `colab status`).
    watchdog_poll_s: float = Field(default=15.0, gt=0)
    # The Hub endpoint for the worker and the VM's uploader (None = the real Hub); set it to a
    # local Hub-compatible server for rehearsals and tests.
    hf_endpoint: str | None = None
    # The VM uploader's commit retries (each attempt one commit; backoff doubles from the base).
    vm_upload_attempts: int = Field(default=6, ge=1)
    vm_upload_backoff_s: float = Field(default=4.0, ge=0)
    heartbeat_interval_s: float = Field(default=5.0, gt=0)
    lease_ttl_s: float = Field(default=30.0, gt=0)
    log_stream_maxlen: int = Field(default=20_000, ge=100)
    # GPU types this worker serves (one queue each: gpu.<type>).
    worker_gpus: tuple[str, ...] = ("T4", "L4", "G4", "A100", "H100")
    janitor_interval_s: float = Field(default=60.0, gt=0)
    # A terminal job's record, history and log stream expire this long after it ended.
    retention_s: float = Field(default=30 * 24 * 3600.0, gt=0)
    # An assignment colabq recorded for a job that is over (or whose owners are all dead) is
    # stopped once it has been seen this long (one and a half janitor intervals: the third
    # pass that sees it stops it, whatever the jitter of the passes); a QUEUED job no queue holds
    # after this long is sent again, once.
    orphan_grace_s: float = Field(default=90.0, ge=0)
    stranded_grace_s: float = Field(default=600.0, ge=0)
    # A watchdog heartbeat older than this: the watchdog (and its host) is gone.
    watchdog_stale_s: float = Field(default=90.0, gt=0)
    # Every Redis call of the runner and the attach client retries this long (with backoff)
    # through an outage before the owner gives up and hands its session to the watchdog.
    redis_retry_s: float = Field(default=60.0, ge=0)
    # Allocation is refused (FAILED_BUDGET, nothing allocated) at or below this balance.
    budget_floor_units: float = Field(default=0.0, ge=0)
    # The wrapper on the VM rewrites its heartbeat file this often; a heartbeat older than
    # `vm_heartbeat_stale_s` means nothing runs there any more.
    vm_heartbeat_s: float = Field(default=5.0, gt=0)
    vm_heartbeat_stale_s: float = Field(default=60.0, gt=0)
    # After its final upload the wrapper waits this long for its owner to stop the VM (so the
    # owner can forward the last log lines), then releases the VM itself.
    release_hold_s: float = Field(default=30.0, ge=0)
    # A failed `colab stop` is tried again this many times in all, after 2, 4, 8 ... s (the
    # base below); then the release is "not verified" and the janitor takes it from there.
    release_attempts: int = Field(default=5, ge=1)
    release_backoff_s: float = Field(default=2.0, ge=0)
    # A dead attach client is replaced at once, then after 1, 2, 4 ... s, at most this long.
    reattach_backoff_max_s: float = Field(default=30.0, gt=0)
    # A live attach client that received nothing this long while the VM's console grew has
    # lost its connection (a dropped websocket): it is replaced.
    attach_stall_s: float = Field(default=30.0, gt=0)
    # Experiment trackers (worker and beat hosts). colabq opens the run of a job that logs to
    # MLflow (and names a W&B run), so the janitor can finish it when the job dies. Credentials
    # are files named here, read on this host only: never Redis, a message, a log or an argv.
    mlflow_tracking_uri: str | None = None
    mlflow_experiment: str = "colabq"  # when the job names none
    mlflow_token_file: Path | None = None  # a bearer token (MLFLOW_TRACKING_TOKEN)
    wandb_api_key_file: Path | None = None
    wandb_entity: str | None = None
    wandb_project: str | None = None  # when the job names none
    wandb_base_url: str = "https://api.wandb.ai"
    # A ghost run (still running while its job is over) is deleted instead of finished.
    tracker_delete_ghosts: bool = False
    # Each tracker call of a worker or a janitor pass gives up after this long.
    tracker_timeout_s: float = Field(default=10.0, gt=0)

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, v: str) -> str:
        if not v.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix://")
        return v

    @field_validator("session_prefix")
    @classmethod
    def _prefix_safe(cls, v: str) -> str:
        if not v or not all(c.isalnum() or c in "-_" for c in v):
            raise ValueError("must be non-empty letters, digits, '-' or '_'")
        return v


def load_settings(**overrides: object) -> Settings:
    """Build the settings at an entry point; an invalid value becomes one ConfigError line."""
    from pydantic import ValidationError

    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise ConfigError(
            f"Invalid setting COLABQ_{field.upper()}: {err['msg']}. "
            "Fix it in the environment or .env."
        ) from None
