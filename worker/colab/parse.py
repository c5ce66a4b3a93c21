"""Pure parsers for the text the `colab` CLI prints, and the typed values they produce.

Owns the exact line formats of `colab-cli-0.7.4.md` (0.7.5 prints the same; it adds one line to
its colab.log, `find_retries`) and `classify_failure`, which turns a failed
call into the matching `ColabError`. Running the CLI is `worker.colab.driver`'s job; nothing
here does I/O. A line that matches no documented format raises `ColabUnrecognisedOutput`: a
wrong guess about a billable VM costs more than a failed call. Nothing here depends on the
endpoint format (UNKNOWN in the spec): an endpoint is whatever stands between the name and
` | Hardware: `.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum

from worker.errors import (
    AcceleratorRejected,
    AllocationRefused,
    CliCall,
    ColabError,
    ColabNotAuthenticated,
    ColabTransportError,
    ColabUnrecognisedOutput,
    ColabUsageError,
    DownloadFailed,
    RemotePathNotFound,
    SessionLost,
    SessionNotFound,
    UploadFailed,
)


@dataclass(frozen=True)
class Usage:
    balance_units: float
    rate_per_hour: float
    active_assignments: int


@dataclass(frozen=True)
class SessionStatus:
    """One session of `colab status -s NAME`. `busy`/`running` are the CLI's local flag only."""

    name: str
    endpoint: str
    hardware: str
    shape: str
    variant: str
    busy: bool
    running: str | None
    last_execution: str | None


@dataclass(frozen=True)
class ServerSession:
    """One server-side assignment of `colab sessions`; `name` is None for `[?]` (no record)."""

    name: str | None
    endpoint: str
    hardware: str
    shape: str
    variant: str


@dataclass(frozen=True)
class LocalRecord:
    """The fields of one sessions.json record that colabq reads."""

    name: str
    endpoint: str
    running: str | None


class StopOutcome(StrEnum):
    STOPPED = "stopped"
    NOT_FOUND = "not_found"


_BANNER = (
    re.compile(r"\[colab\] A new version of Colab CLI is available: \S+ \(current: \S+\)"),
    re.compile(r"\[colab\] Run 'colab update' to update\."),
    re.compile(
        r"\[colab\] To silence this check, set \"enable_update_check\": false in \S*settings\.json"
    ),
)
_PRUNED = re.compile(r"\[colab\] Pruned \d+ stale local session\(s\)\.")
_FIELDS = (
    r"(?P<endpoint>.+?) \| Hardware: (?P<hardware>T4|L4|G4|A100|H100|V5E1|V6E1|CPU)"
    r" \| Shape: (?P<shape>Standard|High-RAM) \| Variant: (?P<variant>DEFAULT|GPU|TPU)"
)
_SERVER_LINE = re.compile(rf"\[(?P<name>[^\]]+)\] {_FIELDS}")
_LAST_EXECUTION = re.compile(r"  Last Execution: (?P<text>.+ at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
_USAGE_LINES = (
    re.compile(r"Current balance: (?P<value>-?\d+\.\d\d) compute units"),
    re.compile(r"Usage rate: (?P<value>-?\d+\.\d\d)/hr"),
    re.compile(r"Active assignments: (?P<value>\d+)"),
)
_VERSION = re.compile(r"Version: (?P<version>\S+)")
# `whoami` (hidden): `Email:` padded to the other labels' column; tokeninfo without the email
# scope prints `<unavailable: token has no userinfo.email scope>` there.
_WHOAMI_EMAIL = re.compile(r"Email: +(?P<email>\S+@\S+)")
_WHOAMI_NO_EMAIL = re.compile(r"Email: +<unavailable: token has no userinfo\.email scope>")
_UPLOADED = re.compile(r"\[colab\] Uploaded '.*' to '.*'")
_DOWNLOADED = re.compile(r"\[colab\] Downloaded '.*' to '.*'")
_NO_SERVER_SESSIONS = "[colab] No active sessions found on server."
_TRACEBACK = "Traceback (most recent call last)"
_EXCEPTION_LINE = re.compile(r"[A-Za-z_][\w.]*(?::.*)?")
# 0.7.5's `Client.assign` (logger colab_cli.client, WARNING) in the CLI's logging format,
# `%(asctime)s - %(name)s - %(levelname)s - %(message)s`: colab.log only, never stdout/stderr.
_RETRY_LINE = re.compile(
    r"(?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d{3} - colab_cli\.client - WARNING - "
    r"(?P<message>Assignment request failed; retrying in \d+s)"
)
_USAGE_WARNING = re.compile(r"\[colab\] Warning: failed to fetch compute-unit info: (?P<cause>.*)")

# Substrings of stderr that mean "the CLI has no usable credentials" (spec §4), on any exit code:
# with an empty store `status`/`sessions` swallow the ADC failure and exit 0.
_AUTH_MARKERS = (
    "DefaultCredentialsError",
    "Your default credentials were not found",
    "No valid default credentials",
    "To authorize colab-cli",
    "EOF when reading a line",
)


def _not_found_line(name: str) -> str:
    return f"[colab] Session '{name}' not found."


def _unrecognised(what: str, text: str, call: CliCall | None) -> ColabUnrecognisedOutput:
    shown = text.strip()[-300:] or "<no output>"
    return ColabUnrecognisedOutput(f"Unrecognised output from colab {what}: {shown!r}", call)


def strip_banner(text: str) -> str:
    """Remove the update banner (three lines, a blank line either side); anything else stays."""
    lines = text.splitlines(keepends=True)
    i = 0
    while i + 3 <= len(lines):
        if all(rx.fullmatch(lines[i + k].rstrip("\r\n")) for k, rx in enumerate(_BANNER)):
            start = i - 1 if i > 0 and not lines[i - 1].strip() else i
            end = i + 4 if i + 3 < len(lines) and not lines[i + 3].strip() else i + 3
            del lines[start:end]
            i = start
        else:
            i += 1
    return "".join(lines)


def output_lines(text: str) -> list[str]:
    """The non-blank lines of stdout once the banner is gone; whitespace is kept (it is format)."""
    return [line for line in strip_banner(text).splitlines() if line.strip()]


def _without_pruned(text: str) -> list[str]:
    return [line for line in output_lines(text) if not _PRUNED.fullmatch(line)]


def parse_version(stdout: str, *, call: CliCall | None = None) -> str:
    lines = output_lines(stdout)
    match = _VERSION.fullmatch(lines[0]) if len(lines) == 1 else None
    if match is None:
        raise _unrecognised("version", stdout, call)
    return match["version"]


def parse_usage(stdout: str, *, call: CliCall | None = None) -> Usage:
    lines = output_lines(stdout)
    if len(lines) != len(_USAGE_LINES):
        raise _unrecognised("usage", stdout, call)
    matches = [rx.fullmatch(line) for rx, line in zip(_USAGE_LINES, lines, strict=True)]
    balance, rate, count = matches
    if balance is None or rate is None or count is None:
        raise _unrecognised("usage", stdout, call)
    return Usage(float(balance["value"]), float(rate["value"]), int(count["value"]))


def parse_whoami(stdout: str, *, call: CliCall | None = None) -> str | None:
    """The login's email (lower case: Google's addresses are not case-sensitive), or None when
    tokeninfo gave none (a token without the userinfo.email scope, as ADC can be)."""
    lines = output_lines(stdout)
    emails = [m for line in lines if (m := _WHOAMI_EMAIL.fullmatch(line))]
    blank = [line for line in lines if _WHOAMI_NO_EMAIL.fullmatch(line)]
    if len(emails) + len(blank) != 1 or not lines[0].startswith("Auth provider: "):
        raise _unrecognised("whoami", stdout, call)
    return emails[0]["email"].lower() if emails else None


def find_retries(log_text: str) -> list[str]:
    """The assignment retries in a piece of the CLI's colab.log, each as `<message> (at <time>)`.
    Only that line's exact shape: the rest of the log holds tokens and is never passed on."""
    found = (_RETRY_LINE.fullmatch(line.rstrip("\r")) for line in log_text.splitlines())
    return [f"{m['message']} (at {m['at']})" for m in found if m is not None]


def parse_new(stdout: str, name: str, *, call: CliCall | None = None) -> None:
    """Success is exactly the two documented lines; anything else may hide an assigned VM."""
    if output_lines(stdout) != [f"[colab] Creating session '{name}'...", "[colab] Session READY."]:
        raise _unrecognised("new", stdout, call)


def parse_status(stdout: str, name: str, *, call: CliCall | None = None) -> SessionStatus | None:
    """The one session line for NAME (and its Last Execution line), or None if NAME is gone."""
    lines = _without_pruned(stdout)
    if lines == [_not_found_line(name)]:
        return None
    pattern = re.compile(
        rf"\[{re.escape(name)}\] {_FIELDS} \| Status: (?:IDLE|BUSY \((?P<running>.+)\))"
    )
    match = pattern.fullmatch(lines[0]) if lines else None
    last = _LAST_EXECUTION.fullmatch(lines[1]) if len(lines) == 2 else None
    if match is None or len(lines) > 2 or (len(lines) == 2 and last is None):
        raise _unrecognised("status", stdout, call)
    return SessionStatus(
        name=name,
        endpoint=match["endpoint"],
        hardware=match["hardware"],
        shape=match["shape"],
        variant=match["variant"],
        busy=match["running"] is not None,
        running=match["running"],
        last_execution=last["text"] if last else None,
    )


def parse_sessions(stdout: str, *, call: CliCall | None = None) -> list[ServerSession]:
    lines = _without_pruned(stdout)
    if lines == [_NO_SERVER_SESSIONS]:
        return []
    found: list[ServerSession] = []
    for line in lines:
        match = _SERVER_LINE.fullmatch(line)
        if match is None:
            raise _unrecognised("sessions", stdout, call)
        found.append(
            ServerSession(
                name=None if match["name"] == "?" else match["name"],
                endpoint=match["endpoint"],
                hardware=match["hardware"],
                shape=match["shape"],
                variant=match["variant"],
            )
        )
    if not found:
        raise _unrecognised("sessions", stdout, call)
    return found


def parse_stop(stdout: str, name: str, *, call: CliCall | None = None) -> StopOutcome:
    lines = _without_pruned(stdout)
    if lines == [f"[colab] Stopping session '{name}'...", "[colab] Session terminated."]:
        return StopOutcome.STOPPED
    if lines == [_not_found_line(name)]:
        return StopOutcome.NOT_FOUND
    raise _unrecognised("stop", stdout, call)


def parse_restart_kernel(stdout: str, *, call: CliCall | None = None) -> None:
    """`restart-kernel` prints nothing on success (a sync may first report pruned records)."""
    if _without_pruned(stdout):
        raise _unrecognised("restart-kernel", stdout, call)


def parse_upload(stdout: str, *, call: CliCall | None = None) -> None:
    lines = output_lines(stdout)
    if len(lines) != 1 or not _UPLOADED.fullmatch(lines[0]):
        raise _unrecognised("upload", stdout, call)


def parse_download(stdout: str, *, call: CliCall | None = None) -> None:
    lines = output_lines(stdout)
    if len(lines) != 1 or not _DOWNLOADED.fullmatch(lines[0]):
        raise _unrecognised("download", stdout, call)


def parse_ls(stdout: str, *, call: CliCall | None = None) -> list[str]:
    """Names, directories first with a trailing `/`; a `[colab] ` line is never a file name."""
    names = output_lines(stdout)
    if any(name.startswith("[colab] ") for name in names):
        raise _unrecognised("ls", stdout, call)
    return names


def parse_local_records(text: str) -> dict[str, LocalRecord]:
    """The records of a sessions.json text; raises ValueError on anything but the documented shape.

    The CLI itself treats a corrupt file as empty; colabq must not, because `new` would then
    overwrite every record in it and orphan their VMs.
    """
    if not text.strip():
        return {}
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("sessions.json is not a JSON object")
    records: dict[str, LocalRecord] = {}
    for name, record in data.items():
        endpoint = record.get("endpoint") if isinstance(record, dict) else None
        running = record.get("running") if isinstance(record, dict) else None
        if not isinstance(endpoint, str) or not (running is None or isinstance(running, str)):
            raise ValueError(f"sessions.json record {name!r} has no endpoint string")
        records[name] = LocalRecord(name=name, endpoint=endpoint, running=running)
    return records


def is_auth_failure(call: CliCall) -> bool:
    """True when the call shows the CLI has no usable credentials, whatever its exit code."""
    if any(marker in call.stderr for marker in _AUTH_MARKERS):
        return True
    if call.returncode == 0:
        return False
    # Click's abort at the oauth2 prompt (stdin at EOF); only meaningful on a failed call.
    aborted = "Aborted." in (call.stdout + "\n" + call.stderr).splitlines()
    return aborted or "Enter the authorization code" in call.stdout


def _subcommand(argv: tuple[str, ...]) -> str:
    """The first word after the global options (each of which takes one value)."""
    index = 1
    while index < len(argv) and argv[index].startswith("-"):
        index += 2
    return argv[index] if index < len(argv) else "call"


def classify_failure(call: CliCall) -> ColabError:
    """The typed error for a call that failed (exit != 0, or an auth failure at exit 0)."""
    sub = _subcommand(call.argv)
    text = strip_banner(call.stdout) + "\n" + call.stderr
    lines = [line.strip() for line in text.splitlines() if line.strip()]

    def first(prefix: str) -> str | None:
        return next((line for line in lines if line.startswith(prefix)), None)

    if is_auth_failure(call):
        return ColabNotAuthenticated(f"colab {sub}: the CLI has no usable credentials.", call)
    known: tuple[tuple[str, type[ColabError]], ...] = (
        ("[colab] Allocation refused", AllocationRefused),
        ("[colab] Backend rejected accelerator", AcceleratorRejected),
        ("[colab] Upload failed:", UploadFailed),
        ("[colab] Local file '", UploadFailed),
        ("[colab] Download failed: File or directory not found:", RemotePathNotFound),
        ("[colab] Download failed:", DownloadFailed),
        ("[colab] whoami: tokeninfo request failed:", ColabTransportError),
        ("[colab] whoami:", ColabNotAuthenticated),  # refused by tokeninfo, or no token
        ("[colab] Error: File or directory not found:", RemotePathNotFound),
    )
    for prefix, error_type in known:
        line = first(prefix)
        if line is not None:
            return error_type(line.removeprefix("[colab] "), call)
    lost = next((line for line in lines if "appears to be lost (404/401)" in line), None)
    if lost is not None:
        return SessionLost(lost.removeprefix("[colab] "), call)
    warning = next((m for line in lines if (m := _USAGE_WARNING.fullmatch(line))), None)
    if warning is not None:
        return ColabTransportError(f"colab {sub}: {warning['cause']}", call)
    missing = re.fullmatch(r"\[colab\] Session '(.+)' not found\.", lines[0]) if lines else None
    if missing is not None and len(lines) == 1:
        return SessionNotFound(
            f"colab {sub}: the CLI has no record of session {missing[1]!r}.", call
        )
    if _TRACEBACK in call.stderr:
        stderr_lines = [line.strip() for line in call.stderr.splitlines() if line.strip()]
        if _EXCEPTION_LINE.fullmatch(stderr_lines[-1]):
            return ColabTransportError(f"colab {sub}: {stderr_lines[-1]}", call)
    if call.returncode == 2:
        return ColabUsageError(f"colab {sub} rejected its command line (exit 2).", call)
    if call.returncode is not None and (call.returncode < 0 or call.returncode in (130, 143)):
        return ColabTransportError(f"colab {sub} was killed by a signal ({call.returncode}).", call)
    return _unrecognised(f"{sub} (exit {call.returncode})", text, call)
