"""The one settings object of colabq (pydantic-settings, `COLABQ_` prefix): the environment over
the user's settings file and a file named with `--env-file` (dotenv files, each its owner's
alone: `worker.settingsfiles`), over the defaults.

Built once at an entry point (`load_settings()`), never at import time, and passed down. Every
invalid value fails at start-up as one `ConfigError` line naming its variable. Secrets are not
settings values: the Hub token is a 0600 file whose *path* is a setting, read only by the runner
on the worker host (a submitting machine uses huggingface_hub's own login, `producer/stage.py`).
Redis's logins are the exception every process needs: the URL's, and the sentinels' password (a
SecretStr: never in a repr). The checks of the settings `colabq status` reads (`redis_url`,
`redis_master_name`, the sentinels' login, `key_prefix`) are `worker.utils`'s and
`worker.records.sentinelurl`'s, so that it can read them without this module when nothing sets
any other setting (`producer.clictx.ledger_address`).

The Hub endpoint of the producer commands (`hub_endpoint()`): `COLABQ_HF_ENDPOINT` (environment
or a settings file), else `HF_ENDPOINT` from the process environment (the variable
huggingface_hub itself reads), else huggingface.co.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from worker.errors import ConfigError
from worker.settingsfiles import settings_files
from worker.utils import key_name_problem, redis_master_name_problem, redis_url_problem

if TYPE_CHECKING:
    from worker.colab.versions import AssignPolicy
    from worker.records.sentinelurl import SentinelLogin

ENV_PREFIX = "COLABQ_"
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
    # No dotenv file by default (never the current folder's `.env`): `load_settings` passes the
    # settings files, as pydantic-settings' `_env_file`.
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_file=None, extra="ignore", frozen=True, allow_inf_nan=False
    )

    # The Redis of the deployment, its broker and ledger, the same on every machine:
    # `redis://[USER:PASSWORD@]HOST:PORT/DB`, `rediss://` for TLS, or kombu's sentinel:// form.
    redis_url: str = "redis://127.0.0.1:6379/0"
    # With a Sentinel redis_url (kombu's form: `sentinel://H1:26379;sentinel://H2:26379/0`), the
    # name of the master its sentinels monitor; required then, and read only then.
    redis_master_name: str | None = Field(default=None, validate_default=True)
    # With a sentinel:// redis_url, the sentinels' own login: their ACL user, if they have one.
    # The URL's USER:PASSWORD@ is the master's; each side gets only its own.
    redis_sentinel_username: str | None = None
    # With a sentinel:// redis_url, the sentinels' `requirepass` (or their ACL user's
    # password). Read only with a sentinel URL; never printed.
    redis_sentinel_password: SecretStr | None = Field(default=None, validate_default=True)
    # Every Redis key colabq writes starts with this, so one Redis can host several deployments.
    key_prefix: str = "colabq"
    # Queues are `<queue_prefix>gpu.<type>`: a prefix keeps deployments (or a demo, or a test)
    # sharing one Redis database from taking each other's jobs.
    queue_prefix: str = ""
    # The `colab` CLI this host runs: a name on PATH or a path (`ops/colab`: the emulator).
    colab_bin: str = "colab"
    # A `colab` release colabq does not list (`worker.colab.versions`), exactly as `colab version`
    # prints it, that an operator runs at their own risk: driven as the newest supported one,
    # with a warning at worker start, in doctor and in every job's report.
    colab_unlisted_version: str | None = None
    # What colabq sets for the CLI (COLAB_CLI_REQUEST_TIMEOUT, COLAB_CLI_ASSIGN_RETRIES,
    # COLAB_CLI_RETRY_BACKOFF: read by 0.7.5): every backend request's timeout and the
    # assignment's retries. colabq's own timeout on `colab new` is the worst case these allow,
    # plus `colab_new_margin_s`, so it kills a `new` only when the CLI hangs.

    # Every backend request's timeout (COLAB_CLI_REQUEST_TIMEOUT).
    colab_request_timeout_s: float = Field(default=120.0, gt=0)
    # How often 0.7.5 retries a failed assignment of `colab new` (COLAB_CLI_ASSIGN_RETRIES).
    colab_assign_retries: int = Field(default=3, ge=0, le=8)
    # The wait before its first retry, doubled each time (COLAB_CLI_RETRY_BACKOFF).
    colab_retry_backoff_s: float = Field(default=10.0, ge=0)
    # Added to the worst case the three above allow: colabq's own timeout on `colab new`.
    colab_new_margin_s: float = Field(default=30.0, ge=0)
    # Worker-local state: the CLI's per-slot sessions.json, job work dirs, recovered results.
    # Proven a writable folder by `ensure_state_dir()` where a command first writes it.
    state_dir: Path = Field(default_factory=_default_state_dir)
    # The timeout of one short `colab` call (status, sessions, ls, a download of a small file).
    colab_call_timeout_s: float = Field(default=30.0, gt=0)
    # The timeout of one `colab upload` (the job's bundle).
    colab_upload_timeout_s: float = Field(default=600.0, gt=0)
    # The session name prefix: colabq's Colab sessions are named with it plus 128 random bits,
    # which proves a session colabq's own. COLABQ_SESSION_PREFIX is its older name, still read.
    session_prefix: str = Field(
        default="colabq-",
        validation_alias=AliasChoices("COLABQ_SESSION_NAME_PREFIX", "COLABQ_SESSION_PREFIX"),
    )
    # A worker host's 0600 file holding the Hub token its jobs' uploads use (tokens never
    # travel through Redis); a submitting machine uses huggingface_hub's own login instead.
    hf_token_file: Path | None = None
    # Hub tokens per destination and per submitting user (0600 files `dest/<owner>__<repo>` and
    # `user/<name>` in this folder), each serving only the users it belongs to: a destination's
    # (and `hf_token_file`) those listed in the `.users` file beside it, a user's own the places
    # its whoami can write (worker/people/destinations.py).
    hf_token_dir: Path | None = None
    # A user's token's whoami (where it may write) is asked of the Hub again after this long.
    hf_scope_cache_s: float = Field(default=600.0, gt=0)
    # The folder under which `local:` destinations (rehearsals: the emulated VM writes a folder of
    # the worker host) and `file://` code snapshots must lie. Unset: anywhere without Redis ACLs,
    # nowhere under them.
    local_store_root: Path | None = None
    # Read credentials for the git remotes of `code: git` jobs, in git-credential-store format
    # (`https://USER:TOKEN@HOST`, one per line), a 0600 file: the pre-allocation check fetches
    # with it and the VM gets it as a file, deleted after its fetch (never argv, log or Redis).
    git_credentials_file: Path | None = None
    # A read-only deploy key (an unencrypted ssh private key, 0600) for `code: git` ssh remotes
    # whose host no credential above covers: shipped to the VM like the credentials, used with
    # it alone, deleted after the fetch (worker/session/gitroute.py).
    git_ssh_key_file: Path | None = None
    # How often a job's owner looks at its attach client and its VM while the job runs.
    poll_interval_s: float = Field(default=2.0, gt=0)
    # The watchdog polls this often (the original used 15 s; each poll may call `colab status`).
    watchdog_poll_s: float = Field(default=15.0, gt=0)
    # The Hub endpoint for the worker and the VM's uploader (None = the real Hub); set it to a
    # local Hub-compatible server for rehearsals and tests. The producer commands read it through
    # `hub_endpoint()`, which falls back to HF_ENDPOINT.
    hf_endpoint: str | None = None
    # The VM uploader's commit retries (each attempt one commit; backoff doubles from the base).
    vm_upload_attempts: int = Field(default=6, ge=1)
    # The wait before the VM uploader's first retry, doubled each time.
    vm_upload_backoff_s: float = Field(default=4.0, ge=0)
    # A job's owner renews its lease this often.
    heartbeat_interval_s: float = Field(default=5.0, gt=0)
    # A job's lease (its lock) lives this long unless renewed: past it, the owner is gone.
    lease_ttl_s: float = Field(default=30.0, gt=0)
    # At most this many lines in a job's log stream in Redis (the full log is in the store).
    log_stream_maxlen: int = Field(default=20_000, ge=100)
    # GPU types this worker serves (one queue each: gpu.<type>): `T4,A100` or `["T4","A100"]`.
    worker_gpus: Annotated[tuple[str, ...], NoDecode] = ALL_GPUS
    # Local times a run should not span (the pre-flight's ETA check warns): comma-separated,
    # a day list kept whole, e.g. `22:00-07:00,Sat,Sun 00:00-24:00` (worker/quiet.py).
    quiet_windows: Annotated[tuple[str, ...], NoDecode] = ()
    # Beat runs a janitor pass this often; a worker host runs its account's pass when none
    # ran for 1.5 of these.
    janitor_interval_s: float = Field(default=60.0, gt=0)
    # The gate (`worker.gate`): a command waits this long for a running gate's answer to its
    # request (5 s when no gate runs; then the request is kept, exit 10).
    gate_wait_s: float = Field(default=60.0, gt=0)
    # A gate reads the list of Redis users (whose request streams it serves) this often.
    gate_refresh_s: float = Field(default=5.0, gt=0)
    # A terminal job's record, history and log stream expire this long after it ended.
    retention_s: float = Field(default=30 * 24 * 3600.0, gt=0)
    # An assignment colabq recorded for a job that is over (or whose owners are all dead) is
    # stopped once it has been seen this long (one and a half janitor intervals: the third
    # pass that sees it stops it, whatever the jitter of the passes); a QUEUED job no queue holds
    # after this long is sent again, once.
    orphan_grace_s: float = Field(default=90.0, ge=0)
    # A QUEUED job older than this whose message no queue holds and no worker owns is sent
    # again, once.
    stranded_grace_s: float = Field(default=600.0, ge=0)
    # Keys of the Redis database a janitor pass walks (SCAN, from where the last pass stopped)
    # to find live jobs missing from the index of live jobs (`worker.janitor.reconcile`); 0: off.
    janitor_reconcile_keys: int = Field(default=20_000, ge=0)
    # A watchdog heartbeat older than this: the watchdog (and its host) is gone. Unset: derived
    # from the watchdog's poll (`worker.janitor.beats`: 3 missed polls + 5 s, at least 10 s).
    watchdog_stale_s: float | None = Field(default=None, gt=0)
    # Every Redis call of the runner and the attach client retries this long (with backoff)
    # through an outage before the owner gives up and hands its session to the watchdog.
    redis_retry_s: float = Field(default=60.0, ge=0)
    # A job Colab cannot serve now waits: its next try after this, doubling each refusal in
    # a row up to the max (its own `capacity_wait_s` ends the wait).
    capacity_backoff_s: float = Field(default=30.0, gt=0)
    # The longest wait between two tries of a job Colab cannot serve now.
    capacity_backoff_max_s: float = Field(default=600.0, gt=0)
    # A worker drained by a host failure probes its health after this, doubling each failed
    # probe up to the max, and takes jobs again when healthy.
    drain_probe_s: float = Field(default=5.0, gt=0)
    # The longest wait between two probes of a drained worker.
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
    # The time zone (IANA) of the quotas' days, weeks (Monday first) and months: the same on
    # every host, as the key prefix (`worker.quota.periods`).
    quota_timezone: str = "UTC"
    # The wrapper on the VM rewrites its heartbeat file this often; a heartbeat older than
    # `vm_heartbeat_stale_s` means nothing runs there any more.
    vm_heartbeat_s: float = Field(default=5.0, gt=0)
    # A VM heartbeat older than this: nothing runs on the VM any more.
    vm_heartbeat_stale_s: float = Field(default=60.0, gt=0)
    # After its final upload the wrapper waits this long for its owner to stop the VM (so the
    # owner can forward the last log lines), then releases the VM itself.
    release_hold_s: float = Field(default=30.0, ge=0)
    # A failed `colab stop` is tried again this many times in all, after 2, 4, 8 ... s (the
    # base below); then the release is "not verified" and the janitor takes it from there.
    release_attempts: int = Field(default=5, ge=1)
    # The wait before the first retry of a failed `colab stop`, doubled each time.
    release_backoff_s: float = Field(default=2.0, ge=0)
    # A dead attach client is replaced at once, then after 1, 2, 4 ... s, at most this long.
    reattach_backoff_max_s: float = Field(default=30.0, gt=0)
    # A live attach client that received nothing this long while the VM's console grew has
    # lost its connection (a dropped websocket): it is replaced.
    attach_stall_s: float = Field(default=30.0, gt=0)
    # Experiment trackers (worker and beat hosts). colabq opens the run of a job that logs to
    # MLflow (and names a W&B run), so the janitor can finish it when the job dies. Credentials
    # are files named here, read on this host only: never Redis, a message, a log or an argv.

    # The MLflow server whose runs colabq opens and finishes (unset: colabq opens none).
    mlflow_tracking_uri: str | None = None
    # The MLflow experiment of a job's run when the job names none.
    mlflow_experiment: str = "colabq"
    # A file holding the MLflow server's bearer token (MLFLOW_TRACKING_TOKEN).
    mlflow_token_file: Path | None = None
    # A 0600 file holding the W&B API key the janitor finishes ghost runs with.
    wandb_api_key_file: Path | None = None
    # The W&B entity (user or team) of the jobs' runs.
    wandb_entity: str | None = None
    # The W&B project of a job's run when the job names none.
    wandb_project: str | None = None
    # The W&B server (a self-hosted one's URL).
    wandb_base_url: str = "https://api.wandb.ai"
    # A ghost run (still running while its job is over) is deleted instead of finished.
    tracker_delete_ghosts: bool = False
    # Each tracker call of a worker or a janitor pass gives up after this long.
    tracker_timeout_s: float = Field(default=10.0, gt=0)
    # `colabq metrics`: label the live jobs' series with their ids too (a series per job: for
    # telling a crashlooping job apart; off, labels are bounded: GPU, account, user, state).
    metrics_job_labels: bool = False
    # `colabq metrics` reads every live job again this often (it follows the event log between).
    metrics_resync_s: float = Field(default=300.0, gt=0)

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

    @field_validator("colab_unlisted_version")
    @classmethod
    def _unlisted_version(cls, v: str | None) -> str | None:
        from worker.colab.versions import version_problem

        if not v or not v.strip():
            return None  # empty: unset
        if problem := version_problem(v.strip()):
            raise ValueError(problem)
        return v.strip()

    @field_validator("redis_sentinel_username")
    @classmethod
    def _sentinel_username(cls, v: str | None) -> str | None:
        from worker.records.sentinelurl import sentinel_username_problem

        v = (v or "").strip() or None  # empty is unset
        if problem := sentinel_username_problem(v):
            raise ValueError(problem)
        return v

    @field_validator("redis_sentinel_password")
    @classmethod
    def _sentinel_password(cls, v: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        from worker.records.sentinelurl import sentinel_password_problem

        password = v.get_secret_value() if v is not None else ""
        username = info.data.get("redis_sentinel_username")
        if problem := sentinel_password_problem(username, password or None):
            raise ValueError(problem)
        return v if password else None  # empty is unset

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

    @field_validator("quota_timezone")
    @classmethod
    def _zone(cls, v: str) -> str:
        from worker.quota.periods import zone

        zone(v)
        return v

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
        "hf_token_file",
        "mlflow_token_file",
        "wandb_api_key_file",
        "git_credentials_file",
        "git_ssh_key_file",
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

    @field_validator("local_store_root")
    @classmethod
    def _store_root(cls, v: Path | None) -> Path | None:
        if v is None or not str(v).strip():
            return None  # empty: unset
        if not v.is_absolute() or (v.exists() and not v.is_dir()):
            raise ValueError(f"{v} must be an absolute path to a folder")
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

    def assign_policy(self) -> AssignPolicy:
        """What the driver sets for the CLI's assignment (`worker.colab.versions`)."""
        from worker.colab.versions import AssignPolicy

        return AssignPolicy(
            self.colab_request_timeout_s, self.colab_assign_retries, self.colab_retry_backoff_s
        )

    def sentinel_login(self) -> SentinelLogin:
        """How to log in to the sentinels of a sentinel:// redis_url (not the master)."""
        from worker.records.sentinelurl import SentinelLogin

        password = self.redis_sentinel_password
        return SentinelLogin(
            self.redis_sentinel_username, password.get_secret_value() if password else None
        )

    def budget_floor_for(self, account: str | None) -> float:
        """The balance at or below which `account`'s worker allocates nothing."""
        return self.budget_floors.get(account or "", self.budget_floor_units)

    def hub_endpoint(self) -> str | None:
        """The Hub the producer commands talk to: COLABQ_HF_ENDPOINT, else HF_ENDPOINT as
        huggingface_hub reads it (the process environment, not a settings file), else None:
        huggingface.co.
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
    """`field` is a field's name, or the first variable of its aliases (a renamed setting):
    the line names every variable that sets it."""
    for name, info in Settings.model_fields.items():
        alias = info.validation_alias
        names = [str(c) for c in alias.choices] if isinstance(alias, AliasChoices) else []
        if names and (field == name or field.upper() in names):
            return ConfigError.invalid(" or ".join(names), why)
    return ConfigError.invalid(f"{ENV_PREFIX}{field.upper()}", why)


def _why(msg: str) -> str:
    """pydantic's message without its "Value error, " lead, and without a closing period."""
    return msg.removeprefix("Value error, ").rstrip(".")


def load_settings(**overrides: object) -> Settings:
    """Build the settings at an entry point, from the environment and the settings files; an
    invalid value, or a settings file others can read, becomes one ConfigError line."""
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    files = settings_files()
    try:
        return Settings(_env_file=files or None, **overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else "?"
        raise _invalid(field, _why(err["msg"])) from None
    except SettingsError as exc:  # a source could not even decode the value
        found = re.search(r'field "(\w+)"', str(exc))
        cause = f" ({exc.__cause__})" if exc.__cause__ else ""
        raise _invalid(found[1] if found else "?", f"cannot be read{cause}") from None
    except OSError as exc:
        where = ", ".join(map(str, files))
        raise ConfigError(
            f"Cannot read the settings file {where} ({exc.strerror}): fix its permissions."
        ) from None
