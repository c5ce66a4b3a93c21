"""The one error tree of colabq.

Every error colabq raises on purpose derives from `ColabqError`, carries structured fields, and
subclasses the builtin that matches its meaning, so callers can catch either. `advice()` turns a
known error into the one line the CLI prints; `RETRYABLE` is the tuple the Celery task retries on.
This module imports nothing of colabq's, so every other module can import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn


class ColabqError(Exception):
    """Root of every error colabq raises deliberately."""

    hint: str = ""

    def advice(self) -> str:
        text = str(self) or type(self).__name__
        return f"{text} {self.hint}".strip()


# --- user input -----------------------------------------------------------------------------


class UserInputError(ColabqError, ValueError):
    """Something the user gave is wrong; nothing was changed."""


class RunNameInUse(UserInputError):
    """A live job already writes to this run's place in the store (same destination)."""

    def __init__(self, run_name: str, job_id: str, state: str, where: str) -> None:
        super().__init__(
            f"Run {run_name!r} already has a live job, {job_id} ({state}), writing to {where}: "
            f"cancel it (`colabq cancel {job_id}`), choose another --name, or pass "
            "--allow-same-run to write to the same place anyway."
        )
        self.run_name, self.job_id, self.state, self.where = run_name, job_id, state, where


class SpecError(UserInputError):
    """A job spec field is invalid."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class GateSilent(ColabqError):
    """No gate answered a request in time; the request is kept in the user's stream and is
    handled when a gate runs (`worker.gate`)."""

    def __init__(self, request_id: str, waited_s: float) -> None:
        super().__init__(
            f"No gate answered within {waited_s:.0f} s: request {request_id} is kept and is "
            "handled when a GPU worker or `colabq gate` runs; see it with `colabq requests`."
        )
        self.request_id = request_id


class ConfigError(UserInputError):
    """A setting is invalid (named by its environment variable)."""

    @classmethod
    def invalid(cls, variable: str, why: str) -> ConfigError:
        return cls(
            f"Invalid setting {variable}: {why}. Fix it in the environment or the settings file "
            "(~/.config/colabq/settings.env, or the --env-file)."
        )


# --- the ledger -----------------------------------------------------------------------------


class LedgerError(ColabqError):
    """The job ledger refused an operation."""


class JobNotFound(LedgerError, LookupError):
    def __init__(self, job_id: str) -> None:
        super().__init__(f"No job {job_id!r}.")
        self.job_id = job_id

    hint = "Run `colabq status` to list jobs."


class AmbiguousJob(JobNotFound):
    """A job-id prefix that several jobs share: the line lists some of them (id and run name)."""

    def __init__(self, prefix: str, candidates: Sequence[tuple[str, str]], total: int) -> None:
        listed = ", ".join(f"{job_id} ({run})" if run else job_id for job_id, run in candidates)
        more = f" and {total - len(candidates)} more" if total > len(candidates) else ""
        LedgerError.__init__(
            self, f"Job id prefix {prefix!r} matches {total} jobs: {listed}{more}."
        )
        self.job_id = prefix
        self.candidates = tuple(candidates)
        self.total = total

    hint = "Type more characters of the id."


class IllegalTransition(LedgerError):
    def __init__(self, job_id: str, src: str, dst: str) -> None:
        super().__init__(f"Job {job_id}: {src} -> {dst} is not an allowed transition.")
        self.job_id, self.src, self.dst = job_id, src, dst


class StaleOwner(LedgerError, PermissionError):
    """A runner whose ownership token is no longer the job's tried to change it."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"Job {job_id} is owned by another runner now.")
        self.job_id = job_id


class UntrustedValue(LedgerError, ValueError):
    """A value read back (from Redis, a message or a spec) is not what its grammar allows
    (`worker.records.ids`): nothing was done with it. `shown` is its repr, cut short."""

    def __init__(self, kind: str, where: str, raw: object) -> None:
        shown = repr(raw) if len(repr(raw)) <= 60 else f"{repr(raw)[:57]}..."
        super().__init__(f"{where} holds {shown}, which is not a {kind}: nothing was done with it.")
        self.kind, self.where, self.shown = kind, where, shown

    hint = "Something wrote it that should not have: an operator may inspect it with redis-cli."


def refuse(kind: str, where: str, raw: object) -> NoReturn:
    """Raise UntrustedValue: `ids.job_id(raw) or refuse("job id", where, raw)`."""
    raise UntrustedValue(kind, where, raw)


def redacted_url(url: str) -> str:
    """A Redis URL fit to print: its password (`redis://:PASSWORD@host`) replaced by `***`; in
    each part of a Sentinel URL (`sentinel://:PASSWORD@h1;sentinel://:PASSWORD@h2`)."""
    from urllib.parse import urlsplit, urlunsplit

    if ";" in url:
        return ";".join(redacted_url(part) for part in url.split(";"))
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        user = parts.username or ""
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host
        netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return "<a malformed Redis URL>"


class BrokerUnavailable(ColabqError, ConnectionError):
    def __init__(self, url: str, cause: str) -> None:
        super().__init__(f"Cannot reach Redis at {redacted_url(url)} ({cause}).")
        self.url = redacted_url(url)

    hint = "Start Redis or set COLABQ_REDIS_URL."


class RedisLoginRefused(BrokerUnavailable):
    """Redis refused colabq's login: with Sentinel, the sentinels (their own login,
    COLABQ_REDIS_SENTINEL_*) or the master (the URL's USER:PASSWORD@), named apart."""

    def __init__(self, url: str, master_name: str | None, *, sentinels: bool = False) -> None:
        where = redacted_url(url)
        if sentinels:
            text = f"The sentinels of {where} refused colabq's login."
            self.hint = (
                "Set COLABQ_REDIS_SENTINEL_PASSWORD (and COLABQ_REDIS_SENTINEL_USERNAME for an "
                "ACL user) to the sentinels' own requirepass, not the master's."
            )
        elif master_name is not None:
            text = (
                f"The Redis master {master_name!r} (named by the sentinels of {where}) refused "
                "the login of COLABQ_REDIS_URL."
            )
            self.hint = (
                "Write the master's USER:PASSWORD@ (its requirepass, or an ACL user's) in "
                "COLABQ_REDIS_URL, not the sentinels'."
            )
        else:
            text = f"Redis at {where} refused the login of COLABQ_REDIS_URL."
            self.hint = "Fix its USER:PASSWORD@ (the requirepass, or an ACL user's)."
        ColabqError.__init__(self, text)
        self.url = where
        self.refused = "sentinels" if sentinels else "master"


# --- the Colab CLI --------------------------------------------------------------------------


@dataclass(frozen=True)
class CliCall:
    """What was run and what came back, for errors about one `colab` call (never a secret)."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str


class ColabError(ColabqError):
    """A `colab` CLI call failed."""

    def __init__(self, message: str, call: CliCall | None = None) -> None:
        super().__init__(message)
        self.call = call


class ColabTimeout(ColabError, TimeoutError):
    """A `colab` call ran past its timeout and was killed."""


class ColabUnrecognisedOutput(ColabError):
    """The CLI printed something the driver does not know; never guessed at."""


class ColabVersionMismatch(ColabError):
    """`colab version` is not a release colabq drives; the message names the supported ones
    and the install command of the newest (`worker.colab.versions.check_release`)."""


class ColabNotAuthenticated(ColabError):
    hint = "Authenticate the colab CLI on this worker host (see `colab --help`), then retry."


class AllocationRefused(ColabError):
    """HTTP 412 on assign: too many sessions, or a usage or capacity limit."""


class AcceleratorRejected(ColabError):
    """HTTP 400 on assign with an accelerator: no quota or entitlement."""


class SessionLost(ColabError):
    """The CLI reported the session lost (404/401) and deleted its record."""


class ColabTransportError(ColabError):
    """A traceback from the CLI: network, backend HTTP error, websocket failure."""


class UploadFailed(ColabError):
    pass


class DownloadFailed(ColabError):
    pass


# --- the runner -----------------------------------------------------------------------------


class BudgetExceeded(ColabqError):
    def __init__(self, balance: float, needed: float, floor: float = 0.0) -> None:
        if balance <= floor:
            what = f"is at or below the floor of {floor:.2f} (COLABQ_BUDGET_FLOOR_UNITS)"
        else:
            what = f"is below this job's budget {needed:.2f}"
        super().__init__(f"Colab balance {balance:.2f} compute units {what}.")
        self.balance, self.needed, self.floor = balance, needed, floor

    hint = "colabq never buys units: lower --budget or top up the account."


class SecretFileError(ColabqError, PermissionError):
    """A token file is missing, empty, too large or not mode 0600."""


class JobLocked(ColabqError):
    """Another runner holds this job's lock (redelivery or double submission)."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"Job {job_id} is already being run by another worker.")
        self.job_id = job_id


class TrackerError(ColabqError):
    """An experiment tracker (MLflow, W&B) could not be reached or refused a call. Its message
    never holds the tracker's credential."""


class StoreError(ColabqError):
    """The artifact store failed."""


# Errors worth another attempt of the same call (the Celery task and the driver's retries).
RETRYABLE: tuple[type[ColabqError], ...] = (ColabTimeout, ColabTransportError, BrokerUnavailable)


# --- appended by the Colab driver (worker/colab.py) -------------------------------------------


class SessionNotFound(ColabError, LookupError):
    """A command that needs the session found no local record of it (exit 1)."""


class RemotePathNotFound(ColabError, FileNotFoundError):
    """`colab ls` was asked for a path that does not exist on the VM."""


class ColabUsageError(ColabError):
    """The CLI rejected its command line (exit 2): a driver bug or a different CLI version."""


class SessionNameInUse(ColabError, FileExistsError):
    """`new` was refused: the CLI would overwrite this local record and orphan its VM."""

    def __init__(self, name: str, endpoint: str) -> None:
        super().__init__(f"Session name {name!r} already has a local record (endpoint {endpoint}).")
        self.name, self.endpoint = name, endpoint


# --- appended by the Hub store (worker/hub.py) -----------------------------------------------


class HubAuthError(StoreError, PermissionError):
    """The Hub refused the token: 401 (unknown or missing) or 403 (read-only, foreign namespace)."""

    def __init__(self, repo_id: str, status: int | None, reason: str) -> None:
        code = f"HTTP {status}" if status else "no token"
        super().__init__(f"The Hub refused access to {repo_id or 'the Hub'} ({code}): {reason}")
        self.repo_id, self.status, self.reason = repo_id, status, reason

    hint = "Use a write token for the repo's namespace (HF_TOKEN, or `hf auth login`)."


class HubNotFound(StoreError, LookupError):
    """A repo, revision or path is not on the Hub (or is another account's private repo)."""

    def __init__(self, uri: str, what: str = "path") -> None:
        super().__init__(f"Not on the Hub: {uri} (the {what} does not exist or is not visible).")
        self.uri, self.what = uri, what

    hint = "Check the repo id, the repo type (datasets/ in the URI?) and the path."


class HubEmptyArtifact(StoreError, ValueError):
    """The path exists but holds no data: zero-byte file(s) only."""

    def __init__(self, uri: str) -> None:
        super().__init__(f"{uri} exists but holds no data (zero bytes).")
        self.uri = uri

    hint = "Upload it again (`colabq stage`) before relying on it."


class HubUnavailable(StoreError, ConnectionError):
    """The Hub kept failing (5xx, 429, dropped connections) through every attempt."""

    def __init__(self, operation: str, attempts: int, status: int | None, reason: str) -> None:
        code = f"HTTP {status}" if status else "connection failed"
        super().__init__(f"Hub {operation} failed after {attempts} attempt(s) ({code}): {reason}")
        self.operation, self.attempts, self.status, self.reason = (
            operation, attempts, status, reason,
        )  # fmt: skip

    hint = "The Hub is down or overloaded: retry later (a failed commit changes nothing)."


class HubRepoNotPrivate(StoreError, PermissionError):
    """An existing output repo is public: colabq never writes results there."""

    def __init__(self, repo_id: str, repo_type: str) -> None:
        super().__init__(f"The {repo_type} repo {repo_id} is public.")
        self.repo_id, self.repo_type = repo_id, repo_type

    hint = "colabq never changes visibility: make it private on the Hub or choose another repo."


class HubDestinationExists(StoreError, FileExistsError):
    """Staging would overwrite data already on the Hub."""

    def __init__(self, uri: str, size_bytes: int) -> None:
        super().__init__(f"{uri} already holds {size_bytes} bytes.")
        self.uri, self.size_bytes = uri, size_bytes

    hint = "Pass --overwrite to replace it, or stage to another path."


class HubRequestError(StoreError):
    """The Hub rejected a request for a reason retrying will not fix (400, 409, 412, 413...)."""

    def __init__(self, operation: str, status: int | None, reason: str) -> None:
        code = f"HTTP {status}" if status else "error"
        super().__init__(f"Hub {operation} was refused ({code}): {reason}")
        self.operation, self.status, self.reason = operation, status, reason


class HubUriError(UserInputError, StoreError):
    """An `hf://` URI that does not parse."""

    def __init__(self, uri: str, reason: str) -> None:
        super().__init__(f"Bad Hub URI {uri!r}: {reason}.")
        self.uri, self.reason = uri, reason

    hint = "Write it as hf://[datasets/]OWNER/REPO[@REVISION][/PATH]."


RETRYABLE = (*RETRYABLE, HubUnavailable)
