"""The one settings object of colabq (pydantic-settings, `COLABQ_` prefix, `.env` supported).

Built once at an entry point (`load_settings()`), never at import time, and passed down. Every
invalid value fails at start-up as one `ConfigError` line naming its variable. Secrets are not
settings values: the Hub token is a 0600 file whose *path* is a setting, read only by the runner
on the worker host (a submitting machine uses huggingface_hub's own login, `producer/stage.py`).
The checks of `redis_url`, `redis_master_name` and `key_prefix` are `worker.utils`'s, so that
`colabq status`, which reads only those three, can read them without this module when nothing
sets any other setting (`producer.clictx.ledger_address`).

The Hub endpoint of the producer commands (`hub_endpoint()`): `COLABQ_HF_ENDPOINT` (environment
or `.env`), else `HF_ENDPOINT` from the process environment (the variable huggingface_hub itself
reads), else huggingface.co.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import Field, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from worker.errors import ConfigError
from worker.utils import key_name_problem, redis_master_name_problem, redis_url_problem

ENV_PREFIX = "COLABQ_"
ENV_FILE = ".env"
ALL_GPUS = ("T4", "L4", "G4", "A100", "H100")  # worker.spec.Gpu's, kept equal by a test


def _default_state_dir() -> Path:
    """`$XDG_STATE_HOME/colabq` (an absolute XDG_STATE_HOME only, as the XDG spec says), else
    `~/.local/state/colabq`."""
    xdg = os.environ.get("XDG_STATE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "state"
    return base / "colabq"


def hub_url_problem(url: str) -> str | None:
    """Why `url` is not a Hub endpoint (http(s)://host[:port][/path]), or None."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http:// or https:// URL with a host (https://huggingface.co)"
    try:
        parts.port  # noqa: B018 - urllib checks the port only when asked
    except ValueError:
        return "its port is not a number in 0-65535"
    return None


def split_quiet_windows(text: str) -> tuple[str, ...]:
    """Split on commas, keeping day lists whole: "Sat,Sun 00:00-24:00, 12:00-13:00" is two."""
    windows: list[str] = []
    pending = ""
    for piece in text.split(","):
        pending = f"{pending},{piece}" if pending else piece
        if ":" in pending:  # a piece without a time is a weekday that continues a day list
            windows.append(pending.strip())
            pending = ""
    if pending.strip():
        windows.append(pending.strip())
    return tuple(w for w in windows if w)


def _list_items(value: object, split: Callable[[str], object]) -> object:
    """An environment value as a list: a JSON list, or the comma syntax `split` reads."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("["):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"not a JSON list ({exc.msg}); or write the items with commas"
            ) from None
    return split(text)


class Settings(BaseSettings):
    # No float setting may be NaN or infinite: `gt=0` alone lets `inf` through.
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_file=ENV_FILE, extra="ignore", frozen=True, allow_inf_nan=False
    )

    redis_url: str = "redis://127.0.0.1:6379/0"
    # With a Sentinel redis_url (kombu's form: `sentinel://H1:26379;sentinel://H2:26379/0`), the
    # name of the master its sentinels monitor; required then, and read only then.
    redis_master_name: str | None = Field(default=None, validate_default=True)
    # Every Redis key colabq writes starts with this, so one Redis can host several deployments.
    key_prefix: str = "colabq"
    # Queues are `<queue_prefix>gpu.<type>`: a prefix keeps deployments (or a demo, or a test)
    # sharing one Redis database from taking each other's jobs.
    queue_prefix: str = ""
    colab_bin: str = "colab"
    colab_version: str = "0.7.4"
    # Worker-local state: the CLI's per-slot sessions.json, job work dirs, recovered results.
    # Proven a writable folder by `ensure_state_dir()` where a command first writes it.
    state_dir: Path = Field(default_factory=_default_state_dir)
    colab_call_timeout_s: float = Field(default=30.0, gt=0)
    colab_upload_timeout_s: float = Field(default=600.0, gt=0)
    # Sessions are proven ours by this prefix plus 128 random bits.
    session_prefix: str = "colabq-"
    hf_token_file: Path | None = None
    # Hub tokens per destination and per submitting user (0600 files `dest/<owner>__<repo>` and
    # `user/<name>` in this folder): a job's uploads use its destination's, else its user's,
    # else `hf_token_file` (worker/session/hubtoken.py).
    hf_token_dir: Path | None = None
    # Read credentials for the git remotes of `code: git` jobs, in git-credential-store format
    # (`https://USER:TOKEN@HOST`, one per line), a 0600 file: the pre-allocation check fetches
    # with it and the VM gets it as a file, deleted after its fetch (never argv, log or Redis).
    git_credentials_file: Path | None = None
    poll_interval_s: float = Field(default=2.0, gt=0)
    # The watchdog polls this often (the original used 15 s; each poll may call `colab status`).
    watchdog_poll_s: float = Field(default=15.0, gt=0)
    # The Hub endpoint for the worker and the VM's uploader (None = the real Hub); set it to a
    # local Hub-compatible server for rehearsals and tests. The producer commands read it through
    # `hub_endpoint()`, which falls back to HF_ENDPOINT.
    hf_endpoint: str | None = None
    # The VM uploader's commit retries (each attempt one commit; backoff doubles from the base).
    vm_upload_attempts: int = Field(default=6, ge=1)
    vm_upload_backoff_s: float = Field(default=4.0, ge=0)
    heartbeat_interval_s: float = Field(default=5.0, gt=0)
    lease_ttl_s: float = Field(default=30.0, gt=0)
    log_stream_maxlen: int = Field(default=20_000, ge=100)
    # GPU types this worker serves (one queue each: gpu.<type>): `T4,A100` or `["T4","A100"]`.
    worker_gpus: Annotated[tuple[str, ...], NoDecode] = ALL_GPUS
    # Local times a run should not span (the pre-flight's ETA check warns): comma-separated,
    # a day list kept whole, e.g. `22:00-07:00,Sat,Sun 00:00-24:00` (worker/quiet.py).
    quiet_windows: Annotated[tuple[str, ...], NoDecode] = ()
    janitor_interval_s: float = Field(default=60.0, gt=0)
    # The gate (`worker.gate`): a client waits this long for a running gate's answer; a gate
    # reads the list of Redis users (whose request streams it serves) this often.
    gate_wait_s: float = Field(default=60.0, gt=0)
    gate_refresh_s: float = Field(default=5.0, gt=0)
    # A terminal job's record, history and log stream expire this long after it ended.
    retention_s: float = Field(default=30 * 24 * 3600.0, gt=0)
    # An assignment colabq recorded for a job that is over (or whose owners are all dead) is
    # stopped once it has been seen this long (one and a half janitor intervals: the third
    # pass that sees it stops it, whatever the jitter of the passes); a QUEUED job no queue holds
    # after this long is sent again, once.
    orphan_grace_s: float = Field(default=90.0, ge=0)
    stranded_grace_s: float = Field(default=600.0, ge=0)
    # A watchdog heartbeat older than this: the watchdog (and its host) is gone. Unset: derived
    # from the watchdog's poll (`worker.janitor.beats`: 3 missed polls + 5 s, at least 10 s).
    watchdog_stale_s: float | None = Field(default=None, gt=0)
    # Every Redis call of the runner and the attach client retries this long (with backoff)
    # through an outage before the owner gives up and hands its session to the watchdog.
    redis_retry_s: float = Field(default=60.0, ge=0)
    # A job Colab cannot serve now waits: its next try after this, doubling each refusal in
    # a row up to the max (its own `capacity_wait_s` ends the wait).
    capacity_backoff_s: float = Field(default=30.0, gt=0)
    capacity_backoff_max_s: float = Field(default=600.0, gt=0)
    # A worker drained by a host failure probes its health after this, doubling each failed
    # probe up to the max, and takes jobs again when healthy.
    drain_probe_s: float = Field(default=5.0, gt=0)
    drain_probe_max_s: float = Field(default=300.0, gt=0)
    # A job put back by this many different workers, each for its own failure, is poison: it
    # ends FAILED with every worker's reason.
    poison_hosts: int = Field(default=3, ge=1)
    # Allocation is refused (FAILED_BUDGET, nothing allocated) at or below this balance.
    budget_floor_units: float = Field(default=0.0, ge=0)
    # The Colab account (the Google login `colab whoami` prints) of this host's CLI: a worker on
    # another login does not start; unset, it is whatever whoami says. Every job a worker runs
    # records it, and only hosts of a job's account act on its VM (`worker.accounts`).
    account: str | None = None
    # Budget floors per account, JSON (`{"a@example.com": 10}`); an account not named here has
    # `budget_floor_units`.
    budget_floors: dict[str, float] = Field(default_factory=dict)
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
    def _redis_url(cls, v: str) -> str:
        if problem := redis_url_problem(v):
            raise ValueError(problem)
        return v

    @field_validator("redis_master_name")
    @classmethod
    def _redis_master_name(cls, v: str | None, info: ValidationInfo) -> str | None:
        v = (v or "").strip() or None  # COLABQ_REDIS_MASTER_NAME= (empty) is unset
        url = info.data.get("redis_url")
        if url is not None and (problem := redis_master_name_problem(url, v)):
            raise ValueError(problem)  # (an invalid redis_url is reported as itself)
        return v

    @field_validator("account")
    @classmethod
    def _account(cls, v: str | None) -> str | None:
        from worker.accounts.names import account_name

        return account_name(v) if v and v.strip() else None  # empty: unset

    @field_validator("budget_floors")
    @classmethod
    def _floors(cls, v: dict[str, float]) -> dict[str, float]:
        from worker.accounts.names import account_name

        if any(floor < 0 for floor in v.values()):
            raise ValueError('a floor is negative; write {"ACCOUNT": UNITS} with UNITS >= 0')
        return {account_name(k): float(floor) for k, floor in v.items()}

    @field_validator("session_prefix")
    @classmethod
    def _prefix_safe(cls, v: str) -> str:
        if not v or not all(c.isalnum() or c in "-_" for c in v):
            raise ValueError("must be non-empty letters, digits, '-' or '_'")
        return v

    @field_validator("key_prefix", "queue_prefix")
    @classmethod
    def _name_safe(cls, v: str, info: ValidationInfo) -> str:
        if problem := key_name_problem(v, empty_ok=info.field_name != "key_prefix"):
            raise ValueError(problem)
        return v

    @field_validator("hf_endpoint")
    @classmethod
    def _hub_url(cls, v: str | None) -> str | None:
        if not v:
            return None  # COLABQ_HF_ENDPOINT= (empty) is unset
        if problem := hub_url_problem(v):
            raise ValueError(problem)
        return v

    @field_validator(
        "hf_token_file", "mlflow_token_file", "wandb_api_key_file", "git_credentials_file"
    )
    @classmethod
    def _secret_file(cls, v: Path | None) -> Path | None:
        if v is not None and v.is_dir():
            raise ValueError(f"{v} is a folder; name the 0600 file that holds the secret")
        return v

    @field_validator("hf_token_dir")
    @classmethod
    def _secret_dir(cls, v: Path | None) -> Path | None:
        if v is not None and v.exists() and not v.is_dir():
            raise ValueError(f"{v} is a file; name the folder that holds dest/ and user/")
        return v

    @field_validator("worker_gpus", mode="before")
    @classmethod
    def _gpu_types(cls, v: object) -> object:
        if v == ALL_GPUS:
            return v  # the default (pydantic-settings validates it too): no need for worker.spec
        from worker.spec import Gpu

        items = _list_items(v, lambda text: text.split(","))
        if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
            raise ValueError("expected GPU types such as T4,A100")
        known = [g.value for g in Gpu]
        names = [i.strip().upper() for i in items if i.strip()]
        for name in names:
            if name not in known:
                raise ValueError(f"{name!r} is not a GPU type ({', '.join(known)})")
        if not names:
            raise ValueError(f"names no GPU type ({', '.join(known)})")
        return tuple(dict.fromkeys(names))

    @field_validator("quiet_windows", mode="before")
    @classmethod
    def _quiet_windows(cls, v: object) -> object:
        if v == ():
            return v  # the default: the windows' parser is not even imported
        from worker.quiet import QuietWindowError, parse_quiet_window

        items = _list_items(v, split_quiet_windows)
        if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
            raise ValueError("expected windows such as 22:00-07:00,Sat,Sun 00:00-24:00")
        windows = tuple(i.strip() for i in items if i.strip())
        for window in windows:
            try:
                parse_quiet_window(window)
            except QuietWindowError as exc:
                raise ValueError(str(exc)) from None
        return windows

    def budget_floor_for(self, account: str | None) -> float:
        """The balance at or below which `account`'s worker allocates nothing."""
        return self.budget_floors.get(account or "", self.budget_floor_units)

    def hub_endpoint(self) -> str | None:
        """The Hub the producer commands talk to: COLABQ_HF_ENDPOINT, else HF_ENDPOINT as
        huggingface_hub reads it (the process environment, not .env), else None: huggingface.co.
        Passed explicitly, so a client imported before HF_ENDPOINT was set still obeys it."""
        if self.hf_endpoint:
            return self.hf_endpoint
        fallback = os.environ.get("HF_ENDPOINT", "").strip()
        if not fallback:
            return None
        if problem := hub_url_problem(fallback):
            raise ConfigError(
                f"Invalid setting HF_ENDPOINT: {problem}. Fix it in the environment, or set "
                "COLABQ_HF_ENDPOINT."
            )
        return fallback

    def ensure_state_dir(self) -> Path:
        """Create the state dir if it is missing and prove it a writable folder; a ConfigError
        naming COLABQ_STATE_DIR otherwise. For the commands that write it, before they start."""
        state = self.state_dir
        try:
            state.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=state, prefix=".write-probe-")
            os.close(fd)
            os.unlink(probe)
        except FileExistsError:
            raise _invalid("state_dir", f"{state} is a file, not a folder") from None
        except OSError as exc:
            why = exc.strerror or type(exc).__name__
            raise _invalid("state_dir", f"{state} is not a writable folder ({why})") from None
        return state


def _invalid(field: str, why: str) -> ConfigError:
    return ConfigError.invalid(f"{ENV_PREFIX}{field.upper()}", why)


def _why(msg: str) -> str:
    """pydantic's message without its "Value error, " lead, and without a closing period."""
    return msg.removeprefix("Value error, ").rstrip(".")


def load_settings(**overrides: object) -> Settings:
    """Build the settings at an entry point; an invalid value becomes one ConfigError line."""
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else "?"
        raise _invalid(field, _why(err["msg"])) from None
    except SettingsError as exc:  # a source could not even decode the value
        found = re.search(r'field "(\w+)"', str(exc))
        cause = f" ({exc.__cause__})" if exc.__cause__ else ""
        raise _invalid(found[1] if found else "?", f"cannot be read{cause}") from None
    except OSError as exc:
        raise ConfigError(
            f"Cannot read the settings file {ENV_FILE} ({exc.strerror}): fix its permissions."
        ) from None
