"""`colabq doctor`: is this machine set up to submit and run jobs? One row per check, each with
PASS, WARN or FAIL, what was found and what to do.

Owns the checks and their table: the `colab` CLI (found, a release the worker drives, its `exec`
path importing: `worker.colab.install`), its login (`colab usage` answers: the balance), Redis
(ping, URL redacted; with Sentinel, how many sentinels answer for the master, where, and whether
they reach a quorum), the Hub token file (Settings.hf_token_file: a non-empty 0600 file; its
content is never printed) and the Hub with that token (whoami at Settings.hf_endpoint), a live
worker per GPU type, and the settings files read (with a WARN for a `.env` holding a password in
a git repository). The checks are the worker's own where it has one (`worker.session.checks`,
the driver, `worker.records.fleet`).

Every check is bounded in time: its calls get the timeout, and a check still running after it
(plus a little) is reported FAIL and left behind in a daemon thread, so doctor never hangs. The
three independent chains (colab, Redis, Hub) run at once. Exit 0 without a FAIL row, else 1;
2 when the CLI is a release colabq does not drive (`colabq worker` refuses to start on it too).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import RenderableType

    from worker.colab.driver import ColabCli
    from worker.settings import Settings

DEFAULT_TIMEOUT_S = 5.0
# What a bounded check gets beyond its own calls' timeout to report how they ended.
_GRACE_S = 2.0


class Status(StrEnum):
    PASS = "PASS"  # noqa: S105 (a status, not a password)
    WARN = "WARN"
    FAIL = "FAIL"


@dataclass(frozen=True)
class Row:
    check: str
    status: Status
    detail: str
    todo: str = ""  # what to do; empty for a PASS
    refuses: bool = False  # a FAIL `colabq worker` refuses to start on: doctor exits 2

    def to_json(self) -> dict[str, str]:
        return {"check": self.check, "status": self.status.value, "detail": self.detail,
                "what_to_do": self.todo}  # fmt: skip


def bounded(check: str, fn: Callable[[], list[Row]], timeout_s: float, todo: str) -> list[Row]:
    """`fn()`'s rows, or one FAIL row if it has not returned after `timeout_s` (it is left to
    finish in a daemon thread) or raised something no check expected."""
    box: list[list[Row]] = []

    def run() -> None:
        try:
            box.append(fn())
        except Exception as exc:  # a bug in a check must not hide the other rows
            detail = f"the check itself failed: {type(exc).__name__}: {exc}"
            box.append([Row(check, Status.FAIL, detail, "report this as a colabq bug")])

    thread = threading.Thread(target=run, name=f"colabq-doctor-{check}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if box:
        return box[0]
    return [Row(check, Status.FAIL, f"no answer within {timeout_s:g} s", todo)]


# --- the colab CLI ----------------------------------------------------------------------------


def colab_rows(settings: Settings, config: Path, timeout_s: float) -> list[Row]:
    """The CLI (found, its release), its `exec` path, then its login (`colab usage`)."""
    from worker.colab.driver import ColabCli
    from worker.colab.versions import install_command

    path = shutil.which(settings.colab_bin)
    if path is None:
        todo = f"install it (`{install_command()}`) or set COLABQ_COLAB_BIN to its path"
        detail = f"{settings.colab_bin!r}: not found or not executable"
        missing = Row("colab CLI", Status.FAIL, detail, todo)
        return [missing, Row("colab login", Status.WARN, "not checked: no colab CLI",
                             "fix the colab CLI first")]  # fmt: skip
    driver = ColabCli(path, config, timeout_s=timeout_s, assign=settings.assign_policy())
    version = bounded(
        "colab CLI", lambda: [version_row(driver, settings)], timeout_s + _GRACE_S,
        f"`{path} version` hangs: reinstall it, `{install_command()}`",
    )  # fmt: skip
    exec_path = bounded(
        "colab exec path", lambda: [exec_row(driver, timeout_s)], 2 * timeout_s + _GRACE_S,
        f"importing the CLI's modules hangs: reinstall it, `{install_command()}`",
    )  # fmt: skip
    login = bounded(
        "colab login", lambda: [login_row(driver, settings)], timeout_s + _GRACE_S,
        "`colab usage` hangs: check this host's network, then run it by hand",
    )  # fmt: skip
    return version + exec_path + login


def version_row(driver: ColabCli, settings: Settings) -> Row:
    from worker.errors import ColabError, ColabVersionMismatch
    from worker.session.checks import check_cli_release

    check = "colab CLI"
    try:
        cli = check_cli_release(driver, settings)
    except ColabVersionMismatch as exc:
        detail, todo = exc.advice().split("; ", 1)
        return Row(check, Status.FAIL, f"{driver.binary}: {detail}", todo, refuses=True)
    except ColabError as exc:
        return Row(check, Status.FAIL, f"{driver.binary}: {exc.advice()}",
                   "run `colab version` by hand to see why")  # fmt: skip
    if warning := cli.warning():
        return Row(check, Status.WARN, f"{driver.binary}: {cli.describe()}", warning)
    return Row(check, Status.PASS, f"{driver.binary}: {cli.describe()}")


def exec_row(driver: ColabCli, timeout_s: float) -> Row:
    """`colab exec`'s imports, in the CLI's own interpreter (`worker.colab.install`)."""
    from worker.colab.install import Verdict, check_exec_path

    found = check_exec_path(Path(driver.binary), driver.exec_env(), 2 * timeout_s)
    status = {Verdict.BROKEN: Status.FAIL, Verdict.UNKNOWN: Status.WARN}.get(found.verdict)
    todo = found.repair or "run `colab exec` on a session by hand once"
    return Row("colab exec path", status or Status.PASS, found.detail, todo if status else "")


def login_row(driver: ColabCli, settings: Settings) -> Row:
    from worker.errors import ColabError, ColabNotAuthenticated

    check = "colab login"
    try:
        usage = driver.usage()
    except ColabNotAuthenticated as exc:
        todo = "run `colab usage` once in a terminal on this host and follow its authorization URL"
        return Row(check, Status.FAIL, f"not logged in: {exc}", todo)
    except ColabError as exc:
        return Row(check, Status.FAIL, f"`colab usage` failed: {exc}", exc.hint or
                   "run `colab usage` by hand to see why")  # fmt: skip
    detail = (
        f"logged in; balance {usage.balance_units:.2f} compute units, "
        f"{usage.rate_per_hour:.2f}/hr, {usage.active_assignments} active assignment(s)"
    )
    floor = settings.budget_floor_for(settings.account)
    if usage.balance_units <= floor:
        todo = "top up the account: colabq never buys units, and refuses to allocate at the floor"
        return Row(check, Status.WARN, f"{detail}: at or below the floor {floor:.2f}", todo)
    return Row(check, Status.PASS, detail)


# --- Redis and the workers --------------------------------------------------------------------


def redis_rows(settings: Settings, timeout_s: float) -> list[Row]:
    """Redis answers; then, on it, a live worker per GPU type."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    from worker.errors import redacted_url
    from worker.records.redisconn import client as redis_client
    from worker.records.sentinels import login_refusal
    from worker.records.sentinelurl import is_sentinel

    where = redacted_url(settings.redis_url)
    sentinels: list[Row] = []
    if is_sentinel(settings.redis_url):
        sentinels = [sentinel_row(settings, timeout_s)]
        where = f"the master {settings.redis_master_name!r} of {where}"
    client = redis_client(
        settings.redis_url, settings.redis_master_name, settings.sentinel_login(),
        socket_connect_timeout=timeout_s, socket_timeout=timeout_s, retry=Retry(NoBackoff(), 0),
    )  # fmt: skip
    try:
        client.ping()
        version = client.info("server").get("redis_version", "?")
    except redis.RedisError as exc:
        refused = login_refusal(
            exc, settings.redis_url, settings.redis_master_name, settings.sentinel_login(),
            timeout_s,
        )  # fmt: skip
        if refused is not None:  # which login, and the setting that holds it
            todo = refused.hint[:1].lower() + refused.hint[1:].rstrip(".")
            return [*sentinels, Row("redis", Status.FAIL, str(refused), todo), _workers_unchecked()]
        detail = f"cannot reach {where} ({type(exc).__name__}: {_password_free(exc, settings)})"
        todo = "start Redis (redis-server), or set COLABQ_REDIS_URL to the one that runs"
        return [*sentinels, Row("redis", Status.FAIL, detail, todo), _workers_unchecked()]
    reachable = Row("redis", Status.PASS, f"{where} answers (Redis {version})")
    return [*sentinels, reachable, *worker_rows(client, settings)]


def sentinel_row(settings: Settings, timeout_s: float) -> Row:
    """How many sentinels answer for the master, where they say it is, and whether they could
    agree on a failover (SENTINEL CKQUORUM)."""
    from worker.records.sentinels import ask_sentinels

    name = str(settings.redis_master_name)
    seen = ask_sentinels(settings.redis_url, name, timeout_s, settings.sentinel_login())
    check, count = "redis sentinels", f"{seen.answered} of {seen.asked} sentinel(s)"
    missing = "; ".join(seen.problems)
    if seen.refused and not seen.answered:
        todo = (
            "set COLABQ_REDIS_SENTINEL_PASSWORD (and COLABQ_REDIS_SENTINEL_USERNAME for an ACL "
            "user) to the sentinels' own requirepass, not the master's"
        )
        detail = f"{seen.refused} of {seen.asked} sentinel(s) refused colabq's login"
        if seen.refused < seen.asked:
            detail += f"; {missing}"
        return Row(check, Status.FAIL, detail, todo)
    if not seen.answered:
        todo = (
            "start the sentinels of COLABQ_REDIS_URL, or set COLABQ_REDIS_MASTER_NAME to the "
            "NAME of their `sentinel monitor NAME ...`"
        )
        return Row(check, Status.FAIL, f"no sentinel knows the master {name!r}: {missing}", todo)
    detail = (
        f"{count} answer for {name!r}: the master is {' or '.join(seen.masters)}, with "
        f"{seen.replicas} replica(s) up; {seen.quorum}"
    )
    if missing:
        return Row(check, Status.WARN, f"{detail}; no answer: {missing}",
                   "start the sentinels that do not answer, or drop them from the URL")  # fmt: skip
    if len(seen.masters) > 1:
        return Row(check, Status.WARN, f"{detail} (a failover is under way?)", "run doctor again")
    if not seen.quorum.startswith("OK"):
        todo = "run at least three sentinels, a majority of them reachable"
        return Row(check, Status.WARN, detail, todo)
    if not seen.replicas:
        todo = "start a replica (redis-server --replicaof MASTER PORT): a failover needs one"
        return Row(check, Status.WARN, detail, todo)
    return Row(check, Status.PASS, detail)


def _password_free(exc: BaseException, settings: Settings) -> str:
    from urllib.parse import urlsplit

    text = " ".join(str(exc).split())[:200]
    secrets = [settings.sentinel_login().password]
    for part in settings.redis_url.split(";"):  # each sentinel:// part may hold it
        try:
            secrets.append(urlsplit(part).password)
        except ValueError:
            continue
    for secret in secrets:
        text = text.replace(secret, "***") if secret else text
    return text


def _workers_unchecked() -> Row:
    return Row("workers", Status.WARN, "not checked: Redis is unreachable", "fix Redis first")


def worker_rows(client: Any, settings: Settings) -> list[Row]:
    """One row per GPU type: the live workers consuming its queue (as `submit` counts them)."""
    from worker.records.fleet import count_serving, live_workers
    from worker.records.keys import Keys
    from worker.spec import Gpu, queue_for

    keys = Keys(settings.key_prefix)
    cards = live_workers(client, keys)
    rows = []
    for gpu in Gpu:
        queue = queue_for(gpu, settings.queue_prefix)
        serving = count_serving(client, keys, queue)
        names = ", ".join(c.name for c in cards if queue in c.queues)
        check = f"worker for {gpu.value}"
        if serving:
            rows.append(Row(check, Status.PASS, f"{serving} live on {queue}: {names}"))
        else:
            todo = f"start one on a worker host: `colabq worker --gpu {gpu.value}`"
            detail = f"no live worker serves {queue}: {gpu.value} jobs wait queued"
            rows.append(Row(check, Status.WARN, detail, todo))
    return rows


# --- the Hub ----------------------------------------------------------------------------------


def hub_rows(settings: Settings, timeout_s: float) -> list[Row]:
    """The token file (never its content), then whoami with it at the configured endpoint."""
    from worker.errors import ColabqError
    from worker.session.checks import check_token_file

    path = settings.hf_token_file
    check = "hub token file"
    if path is None:
        todo = (
            "write a Hub write token to a file, `chmod 600` it and set COLABQ_HF_TOKEN_FILE to "
            "its path (workers read it to write results)"
        )
        return [Row(check, Status.WARN, "COLABQ_HF_TOKEN_FILE is not set", todo), _hub_unchecked()]
    try:
        check_token_file(path)
        token = path.read_text(encoding="utf-8").strip()
    except (ColabqError, OSError, UnicodeDecodeError) as exc:
        text = exc.advice() if isinstance(exc, ColabqError) else f"{path}: {exc}"
        return [Row(check, Status.FAIL, text, _token_file_todo(path)), _hub_unchecked()]
    if not token:
        return [Row(check, Status.FAIL, f"{path} holds only blanks", "write the token into it"),
                _hub_unchecked()]  # fmt: skip
    found = Row(check, Status.PASS, f"{path}: mode 0600, not empty")
    whoami = bounded(
        "hub", lambda: [whoami_row(settings, token)], timeout_s,
        "the Hub does not answer: check COLABQ_HF_ENDPOINT and this host's network",
    )  # fmt: skip
    return [found, *(_scrubbed(r, token) for r in whoami)]


def _token_file_todo(path: Path) -> str:
    if not path.exists():
        return f"write a Hub write token to {path}, then `chmod 600 {path}`"
    return f"make it a regular file holding only the Hub token, of mode 0600: `chmod 600 {path}`"


def _hub_unchecked() -> Row:
    return Row("hub", Status.WARN, "not checked: no usable token file", "fix the token file first")


def whoami_row(settings: Settings, token: str) -> Row:
    from huggingface_hub import HfApi

    from worker.vm.colabq_sync import describe, http_status

    endpoint = (settings.hf_endpoint or "https://huggingface.co").rstrip("/")
    try:
        info = HfApi(endpoint=endpoint, token=token, library_name="colabq").whoami()
    except Exception as exc:  # the HTTP stack's errors vary with huggingface_hub's version
        status = http_status(exc)
        if status in (401, 403):
            todo = "put a valid write token in COLABQ_HF_TOKEN_FILE"
            return Row("hub", Status.FAIL, f"{endpoint} refused the token (HTTP {status})", todo)
        todo = "check COLABQ_HF_ENDPOINT and this host's network"
        return Row("hub", Status.FAIL, f"cannot ask {endpoint}: {describe(exc, token)}", todo)
    name = str(info.get("name") or "?")
    auth = info.get("auth") or {}
    role = str((auth.get("accessToken") or {}).get("role") or "")
    detail = f"{endpoint}: the token of {name}" + (f" ({role})" if role else "")
    if role == "read":
        todo = "workers write results: use a write (or fine-grained, write-scoped) token"
        return Row("hub", Status.WARN, f"{detail}: read-only", todo)
    return Row("hub", Status.PASS, detail)


def _scrubbed(row: Row, token: str) -> Row:
    """The row with the token blanked, should any layer have echoed it."""
    if token not in row.detail and token not in row.todo:
        return row
    return Row(row.check, row.status, row.detail.replace(token, "<token>"),
               row.todo.replace(token, "<token>"))  # fmt: skip


# --- the settings files ----------------------------------------------------------------------


def settings_rows(environ: Mapping[str, str], cwd: Path) -> list[Row]:
    """The settings files read, and a WARN for each dotenv file holding a password in a git
    work tree (`producer.settingscheck`): the current folder's `.env`, the --env-file."""
    from producer.settingscheck import find_exposed
    from worker.settingsfiles import settings_files, user_file

    read = settings_files(environ)  # load_settings checked them: they may be read
    where = ", ".join(f"{p} (0600)" for p in read) or f"no settings file ({user_file(environ)})"
    rows = [Row("settings", Status.PASS, f"the environment and {where}")]
    for found in find_exposed(cwd, environ):
        rows.append(Row("settings", Status.WARN, found.detail(), found.todo(user_file(environ))))
    return rows


# --- the command ------------------------------------------------------------------------------


def diagnose(settings: Settings, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Row]:
    """Every row, in a fixed order; the three chains run at once."""
    with tempfile.TemporaryDirectory(prefix="colabq-doctor-") as tmp:
        config = Path(tmp) / "colab-sessions.json"
        chains: list[tuple[str, Callable[[], list[Row]], str]] = [
            ("colab CLI", lambda: colab_rows(settings, config, timeout_s),
             "the colab CLI hangs: run `colab version` by hand"),
            ("redis", lambda: redis_rows(settings, timeout_s),
             "Redis hangs: check COLABQ_REDIS_URL"),
            ("hub token file", lambda: hub_rows(settings, timeout_s),
             "reading the token file hangs: check the file system it is on"),
        ]  # fmt: skip
        results: list[list[Row]] = [[] for _ in chains]

        def run(i: int) -> None:
            check, fn, todo = chains[i]
            # The longest chain (colab's) is three bounded steps, one of them twice as long.
            results[i] = bounded(check, fn, 4 * (timeout_s + _GRACE_S) + 1, todo)

        threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    settings_first = settings_rows(os.environ, Path.cwd())
    return [*settings_first, *(row for rows in results for row in rows)]


_STYLE = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red"}


def doctor_table(rows: list[Row]) -> RenderableType:
    from rich.table import Table
    from rich.text import Text

    table = Table(title="colabq doctor", title_justify="left")
    for col in ("check", "status", "detail", "what to do"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r.check, Text(r.status.value, _STYLE[r.status]), r.detail, r.todo)
    return table


def verdict(rows: list[Row]) -> str:
    refused = next((r for r in rows if r.refuses), None)
    if refused is not None:
        return f"Refused: {refused.detail}; {refused.todo}"
    failed = sum(r.status is Status.FAIL for r in rows)
    warned = sum(r.status is Status.WARN for r in rows)
    if failed:
        return f"Not ready: {failed} check(s) FAIL, {warned} WARN. Fix the FAIL rows first."
    return f"Ready: no check fails ({warned} WARN)."
