"""`ColabCli` against a tiny fake `colab` that prints canned output and records how it was run."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from worker.colab.driver import ColabCli, check_cli, disable_update_check
from worker.colab.parse import LocalRecord, StopOutcome
from worker.colab.versions import AssignPolicy
from worker.errors import (
    AllocationRefused,
    ColabNotAuthenticated,
    ColabTimeout,
    ColabTransportError,
    ColabUnrecognisedOutput,
    ColabVersionMismatch,
    DownloadFailed,
    SessionNameInUse,
    SpecError,
    UploadFailed,
)

# The fake answers each subcommand (the first word after the global options) from a JSON plan.
FAKE_COLAB = """#!{python}
import json, os, subprocess, sys, time
settings = os.path.join(os.environ["HOME"], ".config", "colab-cli", "settings.json")
record = {{
    "argv": sys.argv[1:],
    "stdin_is_devnull": os.path.samestat(os.fstat(0), os.stat(os.devnull)),
    "typer_standard_traceback": os.environ.get("TYPER_STANDARD_TRACEBACK"),
    "settings": json.load(open(settings)) if os.path.exists(settings) else None,
    "pid": os.getpid(),
    "colab_cli_env": {{k: v for k, v in os.environ.items() if k.startswith("COLAB_CLI_")}},
}}
with open(os.environ["FAKE_COLAB_LOG"], "a") as log:
    log.write(json.dumps(record) + "\\n")
first = 1
while sys.argv[first].startswith("-"):
    first += 2
step = json.load(open(os.environ["FAKE_COLAB_PLAN"]))[sys.argv[first]]
if step.get("child_pid_file"):
    child = subprocess.Popen(["sleep", "60"])
    with open(step["child_pid_file"], "w") as f:
        f.write(str(child.pid))
if step.get("create"):
    with open(sys.argv[step["create"]], "w") as f:
        f.write("downloaded")
if step.get("cli_log"):  # lines the CLI's logging appends to ~/.config/colab-cli/colab.log
    os.makedirs(os.path.dirname(settings), exist_ok=True)
    with open(os.path.join(os.path.dirname(settings), "colab.log"), "a") as f:
        f.write("".join(line + "\\n" for line in step["cli_log"]))
sys.stdout.write(step.get("stdout", ""))
sys.stderr.write(step.get("stderr", ""))
sys.stdout.flush()
sys.stderr.flush()
time.sleep(step.get("sleep_s", 0))
sys.exit(step.get("rc", 0))
"""


@dataclass
class Fake:
    cli: ColabCli
    home: Path
    config: Path
    plan_path: Path
    log_path: Path

    def plan(self, **steps: dict[str, Any]) -> None:
        self.plan_path.write_text(json.dumps(steps))

    def calls(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines()]

    @property
    def settings(self) -> Path:
        return self.home / ".config" / "colab-cli" / "settings.json"


@pytest.fixture
def fake(tmp_path: Path) -> Fake:
    binary = tmp_path / "colab"
    binary.write_text(FAKE_COLAB.format(python=sys.executable))
    binary.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    config = tmp_path / "worker" / "sessions.json"
    plan, log = tmp_path / "plan.json", tmp_path / "calls.jsonl"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "FAKE_COLAB_PLAN": str(plan),
        "FAKE_COLAB_LOG": str(log),
    }
    cli = ColabCli(binary, config, timeout_s=10.0, env=env)
    return Fake(cli, home, config, plan, log)


STATUS_LINE = "[job1] gpu-ab12 | Hardware: T4 | Shape: Standard | Variant: GPU | Status: IDLE\n"
BANNER = (
    "\n[colab] A new version of Colab CLI is available: 0.7.5 (current: 0.7.4)\n"
    "[colab] Run 'colab update' to update.\n"
    '[colab] To silence this check, set "enable_update_check": false in'
    " ~/.config/colab-cli/settings.json\n\n"
)


def test_every_call_has_config_first_devnull_stdin_and_plain_tracebacks(fake: Fake) -> None:
    fake.plan(status={"stdout": STATUS_LINE})
    fake.cli.status("job1")
    (call,) = fake.calls()
    assert call["argv"] == ["--config", str(fake.config), "status", "-s", "job1"]
    assert call["stdin_is_devnull"] is True
    assert call["typer_standard_traceback"] == "1"


def test_auth_mode_is_a_global_option_before_the_subcommand(fake: Fake) -> None:
    fake.plan(stop={"stdout": "[colab] Session 'job1' not found.\n"})
    cli = ColabCli(fake.cli.binary, fake.config, env=fake.cli.exec_env(), auth="adc")
    assert cli.stop("job1") is StopOutcome.NOT_FOUND
    (call,) = fake.calls()
    assert call["argv"] == ["--config", str(fake.config), "--auth", "adc", "stop", "-s", "job1"]


def test_update_check_is_off_before_the_first_call_and_other_keys_kept(fake: Fake) -> None:
    fake.settings.parent.mkdir(parents=True)
    fake.settings.write_text(json.dumps({"update_url": "u", "enable_update_check": True}))
    fake.plan(version={"stdout": "Version: 0.7.4\n"})
    assert fake.cli.version() == "0.7.4"
    (call,) = fake.calls()
    assert call["settings"] == {"update_url": "u", "enable_update_check": False}


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param(None, {"enable_update_check": False}, id="missing-file-created"),
        pytest.param("not json", {"enable_update_check": False}, id="corrupt-file-replaced"),
        pytest.param(
            '{"enable_update_check": false, "last_check": "x"}',
            {"enable_update_check": False, "last_check": "x"},
            id="already-off-untouched",
        ),
    ],
)
def test_disable_update_check(tmp_path: Path, before: str | None, after: dict[str, Any]) -> None:
    path = tmp_path / ".config" / "colab-cli" / "settings.json"
    if before is not None:
        path.parent.mkdir(parents=True)
        path.write_text(before)
    disable_update_check(path)
    assert json.loads(path.read_text()) == after


def test_banner_is_stripped_even_when_it_appears(fake: Fake) -> None:
    fake.plan(status={"stdout": BANNER + STATUS_LINE})
    status = fake.cli.status("job1")
    assert status is not None
    assert status.endpoint == "gpu-ab12"


def _is_gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")  # a zombie nobody has reaped yet is dead all the same


def test_timeout_kills_the_whole_process_group(fake: Fake, tmp_path: Path) -> None:
    child_pid_file = tmp_path / "child.pid"
    fake.plan(status={"stdout": "partial\n", "sleep_s": 60, "child_pid_file": str(child_pid_file)})
    cli = ColabCli(fake.cli.binary, fake.config, timeout_s=1.0, env=fake.cli.exec_env())
    started = time.monotonic()
    with pytest.raises(ColabTimeout) as caught:
        cli.status("job1")
    assert time.monotonic() - started < 10
    assert caught.value.call is not None
    assert caught.value.call.returncode is None
    assert "partial" in caught.value.call.stdout
    pids = [fake.calls()[0]["pid"], int(child_pid_file.read_text())]
    deadline = time.monotonic() + 5
    while not all(_is_gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [_is_gone(pid) for pid in pids] == [True, True]


def test_a_call_within_its_timeout_is_not_killed(fake: Fake) -> None:
    fake.plan(status={"stdout": STATUS_LINE, "sleep_s": 0.2})
    cli = ColabCli(fake.cli.binary, fake.config, timeout_s=10.0, env=fake.cli.exec_env())
    assert cli.status("job1") is not None


def _write_record(config: Path, name: str, endpoint: str) -> None:
    config.parent.mkdir(parents=True, exist_ok=True)
    record = {"name": name, "endpoint": endpoint, "running": None, "token": "t"}
    config.write_text(json.dumps({name: record}, indent=2))


def test_new_refuses_a_name_already_recorded_without_running_anything(fake: Fake) -> None:
    _write_record(fake.config, "job1", "gpu-old")
    fake.plan(new={"stdout": "[colab] Creating session 'job1'...\n[colab] Session READY.\n"})
    with pytest.raises(SessionNameInUse) as caught:
        fake.cli.new("job1", "T4", high_mem=False)
    assert caught.value.endpoint == "gpu-old"
    assert fake.calls() == []


@pytest.mark.parametrize("gpu", ["bogus", "V100", "", "v5e1"])
def test_new_refuses_an_unknown_gpu_without_running_anything(fake: Fake, gpu: str) -> None:
    with pytest.raises(SpecError):
        fake.cli.new("job2", gpu, high_mem=False)
    assert fake.calls() == []


def test_new_with_a_free_name_and_known_gpu_runs(fake: Fake) -> None:
    _write_record(fake.config, "job1", "gpu-old")
    fake.plan(new={"stdout": "[colab] Creating session 'job2'...\n[colab] Session READY.\n"})
    fake.cli.new("job2", "l4", high_mem=True)
    (call,) = fake.calls()
    assert call["argv"][2:] == ["new", "-s", "job2", "--gpu", "L4", "--high-mem"]


READY = "[colab] Creating session 'job2'...\n[colab] Session READY.\n"
# 0.7.5's retry warning as its logging writes it (common.setup_logging's format), and the rest
# of colab.log (DEBUG lines with tokens), which never reaches a caller.
RETRY = "2026-12-04 10:00:0{i},123 - colab_cli.client - WARNING - Assignment request failed; "
DEBUG = "2026-12-04 10:00:00,001 - colab_cli.client - DEBUG - Request Headers: {'Bearer': 'x'}"


def test_every_call_sets_the_clis_own_assignment_variables(fake: Fake) -> None:
    fake.plan(status={"stdout": STATUS_LINE})
    fake.cli.status("job1")
    policy = AssignPolicy(request_timeout_s=45.0, retries=2, backoff_s=5.0)
    cli = ColabCli(fake.cli.binary, fake.config, env=fake.cli.exec_env(), assign=policy)
    cli.status("job1")
    first, second = fake.calls()
    assert first["colab_cli_env"] == {"COLAB_CLI_REQUEST_TIMEOUT": "120",
        "COLAB_CLI_ASSIGN_RETRIES": "3", "COLAB_CLI_RETRY_BACKOFF": "10"}  # fmt: skip
    assert second["colab_cli_env"] == {"COLAB_CLI_REQUEST_TIMEOUT": "45",
        "COLAB_CLI_ASSIGN_RETRIES": "2", "COLAB_CLI_RETRY_BACKOFF": "5"}  # fmt: skip


def test_new_outlasts_the_worst_case_of_the_release_it_checked(fake: Fake) -> None:
    policy = AssignPolicy(request_timeout_s=20.0, retries=3, backoff_s=10.0)
    cli = ColabCli(fake.cli.binary, fake.config, env=fake.cli.exec_env(), assign=policy,
                   new_margin_s=30.0)  # fmt: skip
    # Before any `colab version`: the longest known release's (0.7.4: 3 x 120 s, no variable).
    assert cli.new_timeout_s() == 360.0 + 30.0
    fake.plan(version={"stdout": "Version: 0.7.5\n"})
    cli.version()
    # 0.7.5: refresh + GET + 4 POSTs + 3 GETs at 20 s, and 10 + 20 + 40 s of backoff.
    assert cli.new_timeout_s() == 9 * 20.0 + 70.0 + 30.0


def test_new_reports_the_retries_the_cli_logged_meanwhile_success_or_not(fake: Fake) -> None:
    log = fake.home / ".config" / "colab-cli" / "colab.log"
    log.parent.mkdir(parents=True)
    log.write_text(RETRY.format(i=0) + "retrying in 10s\n")  # an earlier call's: not this one's
    logged = [DEBUG, RETRY.format(i=1) + "retrying in 10s", RETRY.format(i=3) + "retrying in 20s"]
    fake.plan(new={"stdout": READY, "cli_log": logged})
    seen: list[str] = []
    fake.cli.new("job2", "T4", high_mem=False, on_retry=seen.append)
    assert seen == [
        "Assignment request failed; retrying in 10s (at 2026-12-04 10:00:01)",
        "Assignment request failed; retrying in 20s (at 2026-12-04 10:00:03)",
    ]
    fake.config.unlink(missing_ok=True)
    fake.plan(new={"stdout": "[colab] Creating session 'job3'...\n", "rc": 1,
                   "stderr": "Traceback (most recent call last):\ncolab_cli.client."
                   "ColabRequestError: Failed to issue request POST x: 502 Server Error\n",
                   "cli_log": [RETRY.format(i=5) + "retrying in 10s"]})  # fmt: skip
    seen.clear()
    with pytest.raises(ColabTransportError):
        fake.cli.new("job3", "T4", high_mem=False, on_retry=seen.append)
    assert seen == ["Assignment request failed; retrying in 10s (at 2026-12-04 10:00:05)"]


def test_new_without_ready_is_unrecognised(fake: Fake) -> None:
    fake.plan(new={"stdout": "[colab] Creating session 'job2'...\n"})
    with pytest.raises(ColabUnrecognisedOutput):
        fake.cli.new("job2", "T4", high_mem=False)


def test_new_refused_allocation_is_typed(fake: Fake) -> None:
    fake.plan(
        new={
            "stdout": "[colab] Creating session 'job2'...\n",
            "stderr": "[colab] Allocation refused (precondition failed). This can mean ...\n",
            "rc": 1,
        }
    )
    with pytest.raises(AllocationRefused):
        fake.cli.new("job2", "T4", high_mem=False)


@pytest.mark.parametrize("name", ["-s", "a/b", "", "x y", "--help"])
def test_unsafe_session_names_never_reach_the_cli(fake: Fake, name: str) -> None:
    with pytest.raises(SpecError):
        fake.cli.status(name)
    assert fake.calls() == []


def test_status_not_found_is_none_and_a_traceback_raises(fake: Fake) -> None:
    fake.plan(status={"stdout": "[colab] Session 'job1' not found.\n"})
    assert fake.cli.status("job1") is None
    fake.plan(
        status={
            "stderr": "Traceback (most recent call last):\n  File ...\n"
            "requests.exceptions.ConnectionError: boom\n",
            "rc": 1,
        }
    )
    with pytest.raises(ColabTransportError, match="ConnectionError: boom"):
        fake.cli.status("job1")


def test_status_exit_0_with_swallowed_auth_failure_is_not_gone(fake: Fake) -> None:
    fake.plan(
        status={
            "stdout": "[colab] Session 'job1' not found.\n",
            "stderr": "No valid default credentials found. To authenticate, run:\n  gcloud ...\n",
        }
    )
    with pytest.raises(ColabNotAuthenticated):
        fake.cli.status("job1")


@pytest.mark.parametrize(
    ("stdout", "expected"),
    [
        ("[colab] Stopping session 'job1'...\n[colab] Session terminated.\n", StopOutcome.STOPPED),
        ("[colab] Session 'job1' not found.\n", StopOutcome.NOT_FOUND),
    ],
)
def test_stop_outcomes(fake: Fake, stdout: str, expected: StopOutcome) -> None:
    fake.plan(stop={"stdout": stdout})
    assert fake.cli.stop("job1") is expected


def test_usage_and_version_check(fake: Fake) -> None:
    fake.plan(
        usage={
            "stdout": "Current balance: 9.50 compute units\nUsage rate: 1.76/hr\n"
            "Active assignments: 0\n"
        },
        version={"stdout": "Version: 0.7.5\n"},
    )
    assert fake.cli.usage().balance_units == 9.5
    assert check_cli(fake.cli).version == "0.7.5"
    fake.plan(version={"stdout": "Version: 0.8.0\n"})
    with pytest.raises(ColabVersionMismatch):
        check_cli(fake.cli)
    assert check_cli(fake.cli, unlisted_ok="0.8.0").unlisted


def test_upload_passes_absolute_paths_and_types_failure(fake: Fake, tmp_path: Path) -> None:
    local = tmp_path / "job.sh"
    local.write_text("echo hi\n")
    fake.plan(upload={"stdout": "[colab] Uploaded 'job.sh' to '/content/job.sh'\n"})
    fake.cli.upload("job1", local, "/content/job.sh")
    assert fake.calls()[0]["argv"][2:] == ["upload", "-s", "job1", str(local), "/content/job.sh"]
    fake.plan(upload={"stdout": "[colab] Upload failed: Connection refused\n", "rc": 1})
    with pytest.raises(UploadFailed):
        fake.cli.upload("job1", local, "/content/job.sh")


def test_download_requires_the_file_to_exist_afterwards(fake: Fake, tmp_path: Path) -> None:
    target = tmp_path / "job.log"
    ok = "[colab] Downloaded 'content/job.log' to 'x'\n"
    fake.plan(download={"stdout": ok})  # claims success, writes nothing
    with pytest.raises(DownloadFailed):
        fake.cli.download("job1", "content/job.log", target)
    fake.plan(download={"stdout": ok, "create": 7})  # argv[7] is the local path
    fake.cli.download("job1", "content/job.log", target)
    assert target.read_text() == "downloaded"


def test_ls_returns_names(fake: Fake) -> None:
    fake.plan(ls={"stdout": "logs/\njob.sh\n"})
    assert fake.cli.ls("job1", "content") == ["logs/", "job.sh"]


def test_exec_argv_and_env(fake: Fake, tmp_path: Path) -> None:
    argv = fake.cli.exec_argv("job1", tmp_path / "driver.py", 43200)
    assert argv == [
        fake.cli.binary,
        "--config",
        str(fake.config),
        "exec",
        "-s",
        "job1",
        "--timeout",
        "43200.0",
        "-f",
        str(tmp_path / "driver.py"),
    ]
    assert fake.cli.exec_env()["TYPER_STANDARD_TRACEBACK"] == "1"
    assert fake.cli.exec_env()["HOME"] == str(fake.home)
    assert json.loads(fake.settings.read_text()) == {"enable_update_check": False}


def test_local_record_reads_sessions_json(fake: Fake) -> None:
    assert fake.cli.local_record("job1") is None
    _write_record(fake.config, "job1", "gpu-1")
    assert fake.cli.local_record("job1") == LocalRecord("job1", "gpu-1", None)
    assert fake.cli.local_record("job2") is None
    fake.config.write_text("{ torn")
    with pytest.raises(ColabUnrecognisedOutput):
        fake.cli.local_record("job1")
    assert fake.calls() == []
