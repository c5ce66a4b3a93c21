"""The typed driver of the `colab` CLI (the releases of `worker.colab.versions`): what the
runner, watchdog and janitor call.

Owns building each call (the global `--config` before the subcommand), running it with
stdin=/dev/null, `TYPER_STANDARD_TRACEBACK=1`, the CLI's own COLAB_CLI_* variables (its request
timeout and assignment retries) and a timeout that kills the whole process group (for `new`,
longer than the CLI's worst case), keeping the CLI's update check off in its settings.json,
refusing the two `new` calls the CLI gets silently wrong (a name already recorded, a GPU type it
would turn into A100), reading the retries a `new` logged in the CLI's colab.log, and reading the
CLI's sessions.json without calling it. The text formats are `worker.colab.parse`'s; deciding
what to do about a session (retry, stop, reap, reconcile a killed `new`) is the caller's.

No secret ever goes on a command line: the driver has no way to pass `--env`.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Literal, Protocol

from worker.colab.parse import (
    LocalRecord,
    ServerSession,
    SessionStatus,
    StopOutcome,
    Usage,
    classify_failure,
    find_retries,
    is_auth_failure,
    parse_download,
    parse_local_records,
    parse_ls,
    parse_new,
    parse_restart_kernel,
    parse_sessions,
    parse_status,
    parse_stop,
    parse_upload,
    parse_usage,
    parse_version,
    parse_whoami,
)
from worker.colab.versions import (
    DEFAULT_POLICY,
    RELEASES,
    AssignPolicy,
    CliRelease,
    Release,
    check_release,
)
from worker.errors import (
    CliCall,
    ColabError,
    ColabTimeout,
    ColabUnrecognisedOutput,
    DownloadFailed,
    SessionNameInUse,
    SpecError,
)
from worker.records import ids

# The CLI maps any other --gpu value to A100 without a word (spec §1, §5).
GPU_TYPES = ("T4", "L4", "G4", "A100", "H100")
# Names become CLI file names (history/<name>.jsonl) and must never parse as an option.
_NAME = ids.SESSION

__all__ = [
    "GPU_TYPES",
    "ColabCli",
    "ColabDriver",
    "LocalRecord",
    "ServerSession",
    "SessionStatus",
    "StopOutcome",
    "Usage",
    "check_cli",
    "disable_update_check",
]


class ColabDriver(Protocol):
    """What the runner, watchdog and janitor depend on; `ColabCli` is the real one."""

    config_path: Path

    def version(self) -> str: ...
    def usage(self) -> Usage: ...
    def new(
        self, name: str, gpu: str, high_mem: bool, *, on_retry: Callable[[str], None] | None = None
    ) -> None: ...
    def status(self, name: str) -> SessionStatus | None: ...
    def sessions(self) -> list[ServerSession]: ...
    def upload(self, name: str, local: Path, remote: str) -> None: ...
    def download(
        self, name: str, remote: str, local: Path, *, timeout_s: float | None = None
    ) -> None: ...
    def ls(self, name: str, path: str) -> list[str]: ...
    def stop(self, name: str) -> StopOutcome: ...
    def restart_kernel(self, name: str) -> None: ...
    def exec(self, name: str, file: Path, timeout_s: float) -> str: ...
    def exec_argv(self, name: str, file: Path, timeout_s: float) -> list[str]: ...
    def exec_env(self) -> dict[str, str]: ...
    def local_record(self, name: str) -> LocalRecord | None: ...


def check_cli(driver: ColabDriver, unlisted_ok: str | None = None) -> CliRelease:
    """The release the CLI is, or ColabVersionMismatch (one line) for one colabq does not drive
    (`unlisted_ok`: the one unlisted version an operator accepts at their own risk)."""
    return check_release(driver.version(), unlisted_ok)


def disable_update_check(settings_path: Path) -> None:
    """Set `"enable_update_check": false` in the CLI's settings.json, keeping its other keys.

    An unreadable file is replaced: the CLI reads one as all defaults, so nothing is lost.
    """
    try:
        data = json.loads(settings_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        data = {}
    except (ValueError, UnicodeDecodeError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    if data.get("enable_update_check") is False:
        return
    data["enable_update_check"] = False
    settings_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = settings_path.with_name(f".{settings_path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
    os.replace(tmp, settings_path)


def _check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise SpecError("session", f"{name!r} is not a safe session name ({_NAME.pattern}).")
    return name


def _check_remote(path: str) -> str:
    if not path or path.startswith("-") or "\n" in path or "\0" in path:
        raise SpecError("remote path", f"{path!r} is empty, starts with '-' or has a control char.")
    return path


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_from(path: Path, offset: int) -> str:
    """What was appended to `path` after `offset` (all of it if it was rotated meanwhile)."""
    try:
        with open(path, "rb") as f:
            if f.seek(0, os.SEEK_END) >= offset:
                f.seek(offset)
            else:
                f.seek(0)
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _text(f: IO[bytes]) -> str:
    """What a CLI call wrote to `f` (a temporary file), as text."""
    f.seek(0)
    return f.read().decode("utf-8", "replace")


class ColabCli:
    """The real driver: one `colab` executable and one `--config` sessions.json."""

    def __init__(
        self,
        binary: str | Path,
        config_path: Path,
        *,
        timeout_s: float = 30.0,
        upload_timeout_s: float = 600.0,
        assign: AssignPolicy = DEFAULT_POLICY,
        new_margin_s: float = 30.0,
        env: Mapping[str, str] | None = None,
        auth: Literal["oauth2", "adc"] | None = None,
    ) -> None:
        self.binary = str(binary)
        self.config_path = Path(config_path)
        self.timeout_s = timeout_s
        self.upload_timeout_s = upload_timeout_s
        # Killing `new` after the server assigned would leave a VM no record names, so its
        # budget is the CLI's own worst case under `assign` and a margin (`new_timeout_s`).
        self.assign = assign
        self.new_margin_s = new_margin_s
        # The release `version()` last found: its worst case bounds `new` (unknown: the longest).
        self._release: Release | None = None
        self._env = dict(env) if env is not None else None
        # None keeps the CLI's default (oauth2, with a pre-seeded token.json).
        self._global_args = ("--config", str(self.config_path), *(("--auth", auth) if auth else ()))
        self._prepared = False
        self._prepare_lock = threading.Lock()

    # --- process plumbing -------------------------------------------------------------------

    def exec_env(self) -> dict[str, str]:
        """The environment every `colab` process of this driver runs with (exec clients too)."""
        env = dict(os.environ) if self._env is None else dict(self._env)
        env["TYPER_STANDARD_TRACEBACK"] = "1"
        env["PYTHONIOENCODING"] = "utf-8"
        env.update(self.assign.cli_env())
        return env

    def _cli_dir(self) -> Path:
        home = self.exec_env().get("HOME") or pwd.getpwuid(os.getuid()).pw_dir
        return Path(home) / ".config" / "colab-cli"

    def settings_path(self) -> Path:
        return self._cli_dir() / "settings.json"

    def log_path(self) -> Path:
        """The CLI's own log (always on, every call of this HOME appends to it)."""
        return self._cli_dir() / "colab.log"

    def new_timeout_s(self) -> float:
        return self.assign.new_timeout_s(self._release, self.new_margin_s)

    def _prepare(self) -> None:
        with self._prepare_lock:
            if not self._prepared:
                disable_update_check(self.settings_path())
                self._prepared = True

    def _argv(self, args: Sequence[str]) -> tuple[str, ...]:
        return (self.binary, *self._global_args, *args)

    def _run(self, args: Sequence[str], timeout_s: float) -> CliCall:
        self._prepare()
        argv = self._argv(args)
        # Its output goes to files, not pipes: a CLI whose caller dies (a pool process killed)
        # finishes what it does (an assignment it writes down) instead of dying on a broken
        # pipe at its next line, and is found and waited for by whoever owns the job next.
        with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
            try:
                proc = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=out_f, stderr=err_f,
                    env=self.exec_env(), start_new_session=True,
                )  # fmt: skip
            except OSError as exc:
                raise ColabError(f"Cannot run {self.binary}: {exc}") from exc
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc.pid)
                proc.wait()
                call = CliCall(argv, None, _text(out_f), _text(err_f))
                raise ColabTimeout(
                    f"colab {args[0]} ran past {timeout_s:g} s; killed.", call
                ) from None
            except BaseException:
                _kill_group(proc.pid)
                proc.wait()
                raise
            return CliCall(argv, proc.returncode, _text(out_f), _text(err_f))

    def _checked(self, args: Sequence[str], timeout_s: float | None = None) -> CliCall:
        call = self._run(args, self.timeout_s if timeout_s is None else timeout_s)
        if call.returncode != 0 or is_auth_failure(call):
            raise classify_failure(call)
        return call

    # --- commands ---------------------------------------------------------------------------

    def version(self) -> str:
        call = self._checked(["version"])
        found = parse_version(call.stdout, call=call)
        self._release = next((r for r in RELEASES if r.version == found), None)
        return found

    def usage(self) -> Usage:
        call = self._checked(["usage"])
        return parse_usage(call.stdout, call=call)

    def whoami(self) -> str | None:
        """The email of the Google account the CLI is logged in as (hidden `colab whoami`), or
        None when the login's token carries no email."""
        call = self._checked(["whoami"])
        return parse_whoami(call.stdout, call=call)

    def new(
        self, name: str, gpu: str, high_mem: bool, *, on_retry: Callable[[str], None] | None = None
    ) -> None:
        """Assign a VM to NAME. `on_retry` gets each assignment retry the CLI logged meanwhile
        (0.7.5: `Assignment request failed; retrying in 10s`), whether `new` succeeds or not;
        they are read from the CLI's colab.log, which every call of this HOME shares."""
        _check_name(name)
        gpu_type = gpu.upper()
        if gpu_type not in GPU_TYPES:
            raise SpecError("gpu", f"{gpu!r} is not one of {', '.join(GPU_TYPES)}.")
        existing = self.local_record(name)
        if existing is not None:
            raise SessionNameInUse(name, existing.endpoint)
        args = ["new", "-s", name, "--gpu", gpu_type, *(["--high-mem"] if high_mem else [])]
        log_from = _size(self.log_path())
        try:
            call = self._checked(args, self.new_timeout_s())
        finally:
            if on_retry is not None:
                for line in find_retries(_read_from(self.log_path(), log_from)):
                    on_retry(line)
        parse_new(call.stdout, name, call=call)

    def status(self, name: str) -> SessionStatus | None:
        call = self._checked(["status", "-s", _check_name(name)])
        return parse_status(call.stdout, name, call=call)

    def sessions(self) -> list[ServerSession]:
        call = self._checked(["sessions"])
        return parse_sessions(call.stdout, call=call)

    def upload(self, name: str, local: Path, remote: str) -> None:
        args = ["upload", "-s", _check_name(name), str(local.absolute()), _check_remote(remote)]
        call = self._checked(args, self.upload_timeout_s)
        parse_upload(call.stdout, call=call)

    def download(
        self, name: str, remote: str, local: Path, *, timeout_s: float | None = None
    ) -> None:
        """Copy a VM file here (the Contents API answers while the kernel is busy). The CLI has
        no timeout of its own here; `timeout_s` defaults to the upload budget."""
        target = local.absolute()
        args = ["download", "-s", _check_name(name), _check_remote(remote), str(target)]
        call = self._checked(args, self.upload_timeout_s if timeout_s is None else timeout_s)
        parse_download(call.stdout, call=call)
        if not target.is_file():
            raise DownloadFailed(f"colab download reported success but {target} is missing.", call)

    def ls(self, name: str, path: str) -> list[str]:
        call = self._checked(["ls", "-s", _check_name(name), _check_remote(path)])
        return parse_ls(call.stdout, call=call)

    def stop(self, name: str) -> StopOutcome:
        call = self._checked(["stop", "-s", _check_name(name)])
        return parse_stop(call.stdout, name, call=call)

    def restart_kernel(self, name: str) -> None:
        """Restart NAME's kernel: clears a cell left running by a killed exec client (execs on
        one kernel run one at a time). Processes that left the kernel's session, like the
        detached wrapper, are not touched."""
        call = self._checked(["restart-kernel", "-s", _check_name(name)])
        parse_restart_kernel(call.stdout, call=call)

    def exec(self, name: str, file: Path, timeout_s: float) -> str:
        """Run a short cell and return its stdout. exec's own exit status says nothing about
        the code (0 even when it raises): the caller reads its sentinels from the output."""
        args = ["exec", "-s", _check_name(name), "--timeout", repr(float(timeout_s))]
        call = self._checked([*args, "-f", str(file.absolute())], timeout_s + self.timeout_s)
        return call.stdout

    def exec_argv(self, name: str, file: Path, timeout_s: float) -> list[str]:
        """argv of a background `colab exec -f FILE`: spawn it with `exec_env()`, stdin=/dev/null.

        `-f` is required: without it, exec reads stdin and an empty one runs nothing, exit 0.
        """
        self._prepare()
        args = ["exec", "-s", _check_name(name), "--timeout", repr(float(timeout_s))]
        return list(self._argv([*args, "-f", str(file.absolute())]))

    def local_record(self, name: str) -> LocalRecord | None:
        """NAME's record in the CLI's sessions.json, read without running the CLI."""
        for attempt in range(3):
            try:
                return parse_local_records(self.config_path.read_text(encoding="utf-8")).get(name)
            except FileNotFoundError:
                return None
            except ValueError as exc:
                # The CLI rewrites the file in place under its own lock; a read can land mid-write.
                if attempt == 2:
                    raise ColabUnrecognisedOutput(
                        f"{self.config_path} is not a sessions.json the driver understands: {exc}"
                    ) from exc
                time.sleep(0.05)
        return None
