"""The pure parsers of `worker.colab.parse`, over the exact strings of colab-cli-0.7.4.md."""

from __future__ import annotations

import pytest

from worker.colab.parse import (
    LocalRecord,
    ServerSession,
    SessionStatus,
    StopOutcome,
    Usage,
    classify_failure,
    is_auth_failure,
    parse_download,
    parse_local_records,
    parse_ls,
    parse_new,
    parse_sessions,
    parse_status,
    parse_stop,
    parse_upload,
    parse_usage,
    parse_version,
    strip_banner,
)
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

BANNER = (
    "\n"
    "[colab] A new version of Colab CLI is available: 0.7.5 (current: 0.7.4)\n"
    "[colab] Run 'colab update' to update.\n"
    '[colab] To silence this check, set "enable_update_check": false in'
    " ~/.config/colab-cli/settings.json\n"
    "\n"
)
LINE_JOB1 = "[job1] gpu-c793d2b28c | Hardware: T4 | Shape: Standard | Variant: GPU"
STATUS_JOB1 = LINE_JOB1 + " | Status: IDLE\n"
STATUS_KEPT = (
    "[kept] gpu-c3ad3f6fdb | Hardware: CPU | Shape: Standard | Variant: DEFAULT"
    " | Status: BUSY (exec(long.py))\n"
    "  Last Execution: long.py at 2026-12-02 10:24:54\n"
)
PRUNED = "[colab] Pruned 2 stale local session(s).\n"


# --- strip_banner ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(BANNER + "Version: 0.7.4\n", "Version: 0.7.4\n", id="banner-stripped"),
        pytest.param("Version: 0.7.4\n", "Version: 0.7.4\n", id="no-banner-unchanged"),
        pytest.param(
            "[colab] A new version of Colab CLI is available: 0.7.5 (current: 0.7.4)\nx\n",
            "[colab] A new version of Colab CLI is available: 0.7.5 (current: 0.7.4)\nx\n",
            id="partial-banner-kept",
        ),
        pytest.param(
            "\nkeep\n" + BANNER + "after\n", "\nkeep\nafter\n", id="only-banner-blanks-go"
        ),
    ],
)
def test_strip_banner(text: str, expected: str) -> None:
    assert strip_banner(text) == expected


# --- version and usage -------------------------------------------------------------------------


@pytest.mark.parametrize("stdout", ["Version: 0.7.4\n", BANNER + "Version: 0.7.4\n"])
def test_parse_version_reads_the_version(stdout: str) -> None:
    assert parse_version(stdout) == "0.7.4"


@pytest.mark.parametrize("stdout", ["", "0.7.4\n", "Version: 0.7.4\nVersion: 0.7.5\n"])
def test_parse_version_rejects_other_text(stdout: str) -> None:
    with pytest.raises(ColabUnrecognisedOutput):
        parse_version(stdout)


USAGE_OK = "Current balance: 97.46 compute units\nUsage rate: 1.76/hr\nActive assignments: 5\n"


@pytest.mark.parametrize("stdout", [USAGE_OK, BANNER + USAGE_OK])
def test_parse_usage_reads_three_lines(stdout: str) -> None:
    assert parse_usage(stdout) == Usage(97.46, 1.76, 5)


@pytest.mark.parametrize(
    "stdout",
    [
        pytest.param("", id="empty"),
        pytest.param(USAGE_OK.replace("Active assignments: 5\n", ""), id="missing-line"),
        pytest.param(USAGE_OK + "extra\n", id="extra-line"),
        pytest.param(USAGE_OK.replace("97.46", "lots"), id="not-a-number"),
        pytest.param(USAGE_OK.replace("/hr", " per hour"), id="other-unit"),
    ],
)
def test_parse_usage_rejects_other_text(stdout: str) -> None:
    with pytest.raises(ColabUnrecognisedOutput):
        parse_usage(stdout)


# --- new / stop / upload / download / ls ------------------------------------------------------

NEW_OK = "[colab] Creating session 'job1'...\n[colab] Session READY.\n"


@pytest.mark.parametrize("stdout", [NEW_OK, BANNER + NEW_OK])
def test_parse_new_accepts_ready(stdout: str) -> None:
    parse_new(stdout, "job1")


@pytest.mark.parametrize(
    ("stdout", "name"),
    [
        pytest.param("[colab] Creating session 'job1'...\n", "job1", id="no-ready"),
        pytest.param(NEW_OK, "job2", id="other-name"),
        pytest.param(NEW_OK + "surprise\n", "job1", id="extra-line"),
    ],
)
def test_parse_new_rejects_anything_else(stdout: str, name: str) -> None:
    with pytest.raises(ColabUnrecognisedOutput):
        parse_new(stdout, name)


@pytest.mark.parametrize(
    ("stdout", "expected"),
    [
        ("[colab] Stopping session 'job1'...\n[colab] Session terminated.\n", StopOutcome.STOPPED),
        ("[colab] Session 'job1' not found.\n", StopOutcome.NOT_FOUND),
        (BANNER + PRUNED + "[colab] Session 'job1' not found.\n", StopOutcome.NOT_FOUND),
    ],
)
def test_parse_stop_outcomes(stdout: str, expected: StopOutcome) -> None:
    assert parse_stop(stdout, "job1") is expected


@pytest.mark.parametrize(
    "stdout",
    [
        "[colab] Stopping session 'job1'...\n",
        "[colab] Session 'other' not found.\n",
        "",
    ],
)
def test_parse_stop_rejects_anything_else(stdout: str) -> None:
    with pytest.raises(ColabUnrecognisedOutput):
        parse_stop(stdout, "job1")


def test_parse_upload_and_download_accept_their_success_line() -> None:
    parse_upload("[colab] Uploaded 'job.sh' to '/content/job.sh'\n")
    parse_download(BANNER + "[colab] Downloaded 'content/job.log' to '/tmp/job.log'\n")


@pytest.mark.parametrize("stdout", ["", "[colab] Downloaded 'a' to 'b'\n", "ok\n"])
def test_parse_upload_rejects_anything_else(stdout: str) -> None:
    with pytest.raises(ColabUnrecognisedOutput):
        parse_upload(stdout)


@pytest.mark.parametrize("stdout", ["", "[colab] Uploaded 'a' to 'b'\n"])
def test_parse_download_rejects_anything_else(stdout: str) -> None:
    with pytest.raises(ColabUnrecognisedOutput):
        parse_download(stdout)


@pytest.mark.parametrize(
    ("stdout", "names"),
    [
        ("logs/\njob.sh\nexit_code\n", ["logs/", "job.sh", "exit_code"]),
        ("", []),
        (BANNER + "a.txt\n", ["a.txt"]),
    ],
)
def test_parse_ls_returns_names(stdout: str, names: list[str]) -> None:
    assert parse_ls(stdout) == names


def test_parse_ls_rejects_cli_chatter() -> None:
    with pytest.raises(ColabUnrecognisedOutput):
        parse_ls("[colab] Using unique session 'job1'.\na.txt\n")


# --- status ------------------------------------------------------------------------------------

IDLE_JOB1 = SessionStatus(
    name="job1",
    endpoint="gpu-c793d2b28c",
    hardware="T4",
    shape="Standard",
    variant="GPU",
    busy=False,
    running=None,
    last_execution=None,
)


@pytest.mark.parametrize(
    ("stdout", "name", "expected"),
    [
        pytest.param(STATUS_JOB1, "job1", IDLE_JOB1, id="idle"),
        pytest.param(BANNER + PRUNED + STATUS_JOB1, "job1", IDLE_JOB1, id="banner-and-pruned"),
        pytest.param(
            STATUS_KEPT,
            "kept",
            SessionStatus(
                name="kept",
                endpoint="gpu-c3ad3f6fdb",
                hardware="CPU",
                shape="Standard",
                variant="DEFAULT",
                busy=True,
                running="exec(long.py)",
                last_execution="long.py at 2026-12-02 10:24:54",
            ),
            id="busy-with-last-execution",
        ),
        pytest.param(
            "[hm] tpu-v5e1-s-kkb-x y | Hardware: A100 | Shape: High-RAM | Variant: GPU"
            " | Status: IDLE\n  Last Execution: stdin | Cell: 3 at 2026-01-01 00:00:00\n",
            "hm",
            SessionStatus(
                name="hm",
                endpoint="tpu-v5e1-s-kkb-x y",
                hardware="A100",
                shape="High-RAM",
                variant="GPU",
                busy=False,
                running=None,
                last_execution="stdin | Cell: 3 at 2026-01-01 00:00:00",
            ),
            id="endpoint-format-not-assumed",
        ),
        pytest.param("[colab] Session 'job1' not found.\n", "job1", None, id="not-found"),
        pytest.param(
            PRUNED + "[colab] Session 'job1' not found.\n", "job1", None, id="pruned-not-found"
        ),
    ],
)
def test_parse_status(stdout: str, name: str, expected: SessionStatus | None) -> None:
    assert parse_status(stdout, name) == expected


@pytest.mark.parametrize(
    ("stdout", "name"),
    [
        pytest.param("", "job1", id="empty"),
        pytest.param("[colab] No active sessions.\n", "job1", id="no-active-sessions"),
        pytest.param(STATUS_JOB1, "job2", id="line-for-another-name"),
        pytest.param(STATUS_JOB1 + STATUS_JOB1, "job1", id="two-lines"),
        pytest.param("[colab] Session 'job2' not found.\n", "job1", id="not-found-other-name"),
        pytest.param(STATUS_JOB1.replace("T4", "X9"), "job1", id="unknown-hardware"),
        pytest.param(STATUS_JOB1.replace("IDLE", "RUNNING"), "job1", id="unknown-status"),
        pytest.param(STATUS_JOB1 + "  Last Execution: soon\n", "job1", id="bad-last-exec"),
        pytest.param("  Last Execution: a at 2026-12-02 10:24:54\n", "job1", id="orphan-line"),
        pytest.param("Traceback (most recent call last):\n", "job1", id="garbage"),
    ],
)
def test_parse_status_rejects_anything_else(stdout: str, name: str) -> None:
    with pytest.raises(ColabUnrecognisedOutput):
        parse_status(stdout, name)


# --- sessions ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stdout", "expected"),
    [
        pytest.param(
            LINE_JOB1 + "\n[?] orphan-ep | Hardware: T4 | Shape: Standard | Variant: GPU\n",
            [
                ServerSession("job1", "gpu-c793d2b28c", "T4", "Standard", "GPU"),
                ServerSession(None, "orphan-ep", "T4", "Standard", "GPU"),
            ],
            id="named-and-orphan",
        ),
        pytest.param("[colab] No active sessions found on server.\n", [], id="none"),
        pytest.param(
            BANNER + PRUNED + "[colab] No active sessions found on server.\n", [], id="pruned"
        ),
    ],
)
def test_parse_sessions(stdout: str, expected: list[ServerSession]) -> None:
    assert parse_sessions(stdout) == expected


@pytest.mark.parametrize(
    "stdout",
    [
        pytest.param("", id="empty"),
        pytest.param(STATUS_JOB1, id="status-line-has-status-field"),
        pytest.param(LINE_JOB1 + "\nsomething else\n", id="garbage-line"),
        pytest.param("[colab] No active sessions.\n", id="status-wording"),
    ],
)
def test_parse_sessions_rejects_anything_else(stdout: str) -> None:
    with pytest.raises(ColabUnrecognisedOutput):
        parse_sessions(stdout)


# --- sessions.json -----------------------------------------------------------------------------


def test_parse_local_records_reads_name_endpoint_running() -> None:
    text = (
        '{"job1": {"name": "job1", "endpoint": "gpu-1", "running": null, "token": "t"},'
        ' "kept": {"name": "kept", "endpoint": "gpu-2", "running": "exec(long.py)"}}'
    )
    assert parse_local_records(text) == {
        "job1": LocalRecord("job1", "gpu-1", None),
        "kept": LocalRecord("kept", "gpu-2", "exec(long.py)"),
    }
    assert parse_local_records("") == {}


@pytest.mark.parametrize(
    "text",
    ["{", "[]", '{"a": 1}', '{"a": {"endpoint": 3}}', '{"a": {"endpoint": "e", "running": 1}}'],
)
def test_parse_local_records_rejects_other_shapes(text: str) -> None:
    with pytest.raises(ValueError):
        parse_local_records(text)


# --- classify_failure --------------------------------------------------------------------------

ARGV = ("colab", "--config", "/tmp/s.json")
ALLOCATION_REFUSED = (
    "[colab] Allocation refused (precondition failed). This can mean too many active sessions,"
    " or a temporary usage or capacity limit for the requested runtime. Run `colab stop` to free"
    " up a session, wait and retry, or try a different accelerator.\n"
)
ACCELERATOR_REJECTED = (
    "[colab] Backend rejected accelerator 'H100'. You may not have quota or entitlement for this"
    " accelerator on your account. Try a different one (e.g. --gpu T4) or omit --gpu/--tpu for a"
    " CPU runtime.\n"
)
CONNECTION_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/x/colab_cli/client.py", line 10, in assign\n'
    "    raise exc\n"
    "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='colab.research.google.com',"
    " port=443): Max retries exceeded\n"
)
ADC_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/x/google/auth/_default.py", line 1, in default\n'
    "google.auth.exceptions.DefaultCredentialsError: Your default credentials were not found."
    " To set up Application Default Credentials, see https://cloud.google.com/docs/...\n"
)
GCLOUD_HINT = (
    "No valid default credentials found. To authenticate, run:\n"
    "  gcloud auth application-default login --scopes=openid,...\n"
)
OAUTH_PROMPT_ERR = (
    "To authorize colab-cli, visit this URL in any browser:\nhttps://accounts.google.com/o/...\n"
    "After approving, Google will display an authorization code.\n"
)


def _call(sub: str, rc: int | None, stdout: str = "", stderr: str = "") -> CliCall:
    return CliCall((*ARGV, sub), rc, stdout, stderr)


@pytest.mark.parametrize(
    ("call", "error_type", "in_message"),
    [
        pytest.param(
            _call("new", 1, "[colab] Creating session 'j'...\n", ALLOCATION_REFUSED),
            AllocationRefused,
            "Allocation refused",
            id="412",
        ),
        pytest.param(
            _call("new", 1, "[colab] Creating session 'j'...\n", ACCELERATOR_REJECTED),
            AcceleratorRejected,
            "'H100'",
            id="400-accelerator",
        ),
        pytest.param(
            _call("new", 1, "", CONNECTION_TRACEBACK),
            ColabTransportError,
            "requests.exceptions.ConnectionError: HTTPSConnectionPool",
            id="traceback-keeps-last-line",
        ),
        pytest.param(
            _call(
                "stop",
                1,
                "[colab] Stopping session 'j'...\n",
                "Traceback (most recent call last):\n  File ...\n"
                "colab_cli.client.ColabRequestError: Failed to issue request GET https://x: 503\n",
            ),
            ColabTransportError,
            "ColabRequestError: Failed to issue request",
            id="stop-http-error",
        ),
        pytest.param(
            _call("status", 1, "", ADC_TRACEBACK), ColabNotAuthenticated, "", id="adc-missing"
        ),
        pytest.param(_call("status", 1, "", GCLOUD_HINT), ColabNotAuthenticated, "", id="adc-bad"),
        pytest.param(
            _call("status", 0, "[colab] No active sessions.\n", GCLOUD_HINT),
            ColabNotAuthenticated,
            "",
            id="adc-swallowed-exit-0",
        ),
        pytest.param(
            _call("new", 1, "Enter the authorization code: ", OAUTH_PROMPT_ERR + "Aborted.\n"),
            ColabNotAuthenticated,
            "",
            id="oauth-prompt-aborted",
        ),
        pytest.param(_call("stop", 1, "Aborted.\n"), ColabNotAuthenticated, "", id="aborted-alone"),
        pytest.param(
            _call(
                "usage",
                1,
                "",
                "[colab] Warning: failed to fetch compute-unit info: EOF when reading a line\n",
            ),
            ColabNotAuthenticated,
            "",
            id="usage-oauth-eof",
        ),
        pytest.param(
            _call(
                "usage",
                1,
                "",
                "[colab] Warning: failed to fetch compute-unit info: Your default credentials"
                " were not found. To set up ...\n",
            ),
            ColabNotAuthenticated,
            "",
            id="usage-adc-missing",
        ),
        pytest.param(
            _call(
                "usage",
                1,
                "",
                "[colab] Warning: failed to fetch compute-unit info: Failed to issue request"
                " GET https://colab.research.google.com/tun/m/ccu-info: 503\n",
            ),
            ColabTransportError,
            "Failed to issue request",
            id="usage-backend-error",
        ),
        pytest.param(
            _call("upload", 1, "[colab] Upload failed: Connection refused\n"),
            UploadFailed,
            "Upload failed: Connection refused",
            id="upload-failed",
        ),
        pytest.param(
            _call("upload", 1, "[colab] Local file 'job.sh' not found.\n"),
            UploadFailed,
            "job.sh",
            id="upload-local-missing",
        ),
        pytest.param(
            _call("download", 1, "[colab] Download failed: File or directory not found: c/x\n"),
            RemotePathNotFound,
            "c/x",
            id="download-404",
        ),
        pytest.param(
            _call("download", 1, "[colab] Download failed: Cannot download a directory: c\n"),
            DownloadFailed,
            "directory",
            id="download-dir",
        ),
        pytest.param(
            _call("ls", 1, "[colab] Error: File or directory not found: content/nope\n"),
            RemotePathNotFound,
            "content/nope",
            id="ls-404",
        ),
        pytest.param(
            _call("upload", 1, "[colab] Session 'job1' not found.\n"),
            SessionNotFound,
            "job1",
            id="no-local-record",
        ),
        pytest.param(
            _call("ls", 1, "[colab] Session 'job1' appears to be lost (404/401). Cleaning up.\n"),
            SessionLost,
            "lost",
            id="session-lost",
        ),
        pytest.param(
            _call("new", 2, "", "Usage: colab new [OPTIONS]\n Error: No such option: --gpux\n"),
            ColabUsageError,
            "exit 2",
            id="click-usage",
        ),
        pytest.param(_call("stop", 143), ColabTransportError, "signal", id="sigterm"),
        pytest.param(_call("stop", -9), ColabTransportError, "signal", id="sigkill"),
        pytest.param(
            _call("stop", 1, "something new\n"), ColabUnrecognisedOutput, "something", id="garbage"
        ),
        pytest.param(_call("stop", 1), ColabUnrecognisedOutput, "exit 1", id="silent-exit-1"),
        pytest.param(
            _call("status", 1, "", "Traceback (most recent call last):\n  File ...\n    x = (\n"),
            ColabUnrecognisedOutput,
            "",
            id="truncated-traceback",
        ),
    ],
)
def test_classify_failure(call: CliCall, error_type: type[ColabError], in_message: str) -> None:
    error = classify_failure(call)
    assert type(error) is error_type
    assert in_message in str(error)
    assert error.call is call


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        pytest.param(_call("status", 0, STATUS_JOB1), False, id="clean-success"),
        pytest.param(_call("status", 0, "", GCLOUD_HINT), True, id="hint-on-exit-0"),
        pytest.param(_call("ls", 0, "Aborted.\n"), False, id="file-named-aborted"),
        pytest.param(_call("ls", 1, "Aborted.\n"), True, id="aborted-on-failure"),
    ],
)
def test_is_auth_failure(call: CliCall, expected: bool) -> None:
    assert is_auth_failure(call) is expected
