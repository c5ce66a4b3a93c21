"""Through the real `colabq` (a subprocess, as a user runs it): an invalid setting is one line on
stderr naming its variable, exit 2, no traceback, whichever command reads it; the state dir is
checked by the commands that write it; settings come from the user's settings file
(~/.config/colabq/settings.env) and from a .env in the cwd only when `--env-file` names it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.training_repo import GOOD_NAME, QUIET_ENV, make_repo
from tests.unit.settings_env import write_private

COLABQ = str(Path(sys.executable).parent / "colabq")
_OTHERS = ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "HF_ENDPOINT")  # what else the settings read
FIX = (
    "Fix it in the environment or the settings file (~/.config/colabq/settings.env, or the "
    "--env-file)."
)


def colabq(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`colabq ARGS` in `cwd` with no colabq setting of this shell, only `env`'s."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.upper().startswith("COLABQ_") and k not in (*QUIET_ENV, *_OTHERS)
    }
    full = {**base, "HOME": str(cwd / "home"), "COLUMNS": "200", **env}
    return subprocess.run(
        [COLABQ, *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=60
    )


def assert_one_line(done: subprocess.CompletedProcess[str], var: str) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"colabq: Invalid setting {var}: "), lines[0]
    assert lines[0].endswith(FIX), lines[0]
    return lines[0]


BAD = [
    ("COLABQ_REDIS_URL", "redis://127.0.0.1:abc/0"),
    ("COLABQ_WORKER_GPUS", "T4,V100"),
    ("COLABQ_WORKER_GPUS", '["T4"'),
    ("COLABQ_QUEUE_PREFIX", "../"),
    ("COLABQ_KEY_PREFIX", "a b*"),
    ("COLABQ_POLL_INTERVAL_S", "nan"),
    ("COLABQ_HEARTBEAT_INTERVAL_S", "-1"),
    ("COLABQ_QUIET_WINDOWS", "late evening"),
    ("COLABQ_HF_ENDPOINT", "huggingface.co"),
]


@pytest.mark.parametrize(("var", "value"), BAD, ids=[f"{v}={x}" for v, x in BAD])
def test_status_with_an_invalid_setting_is_one_line_exit_2(
    tmp_path: Path, var: str, value: str
) -> None:
    assert_one_line(colabq("status", cwd=tmp_path, **{var: value}), var)


def test_a_token_file_that_is_a_folder_is_one_line(tmp_path: Path) -> None:
    line = assert_one_line(
        colabq("status", cwd=tmp_path, COLABQ_HF_TOKEN_FILE=str(tmp_path)), "COLABQ_HF_TOKEN_FILE"
    )
    assert "is a folder" in line


@pytest.mark.parametrize("where", ["--env-file", "settings file"])
def test_an_invalid_setting_in_a_settings_file_is_one_line(tmp_path: Path, where: str) -> None:
    text = "COLABQ_REDIS_URL=redis://127.0.0.1:6379/zero\n"
    if where == "--env-file":
        write_private(tmp_path / ".env", text)
        argv = ["--env-file", ".env", "status"]
    else:
        write_private(tmp_path / "home" / ".config" / "colabq" / "settings.env", text)
        argv = ["status"]
    line = assert_one_line(colabq(*argv, cwd=tmp_path), "COLABQ_REDIS_URL")
    assert "database 'zero'" in line


@pytest.mark.parametrize("where", ["--env-file", "settings file"])
def test_a_settings_file_others_can_read_is_refused_in_one_line(tmp_path: Path, where: str) -> None:
    text = "COLABQ_REDIS_URL=redis://:s3cret-pass@127.0.0.1:9/0\n"
    if where == "--env-file":
        path = write_private(tmp_path / ".env", text, 0o644)
        argv = ["--env-file", ".env", "status"]
    else:
        path = write_private(tmp_path / "home" / ".config" / "colabq" / "settings.env", text, 0o640)
        argv = ["status"]
    done = colabq(*argv, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.splitlines() == [
        f"colabq: The settings file {path} is mode {oct(path.stat().st_mode)[-4:].rjust(4, '0')}: "
        f"others may read it and it may hold the Redis password; `chmod 600 {path}`."
    ]
    assert "s3cret-pass" not in done.stderr


def test_a_dot_env_in_the_cwd_is_read_only_with_env_file(tmp_path: Path) -> None:
    """A training repository's .env is not colabq's settings unless the user says so."""
    write_private(tmp_path / ".env", "COLABQ_REDIS_URL=redis://127.0.0.1:6379/zero\n")
    # Not read: status reaches the (unreachable) Redis of the environment, not the .env's.
    done = colabq("status", cwd=tmp_path, COLABQ_REDIS_URL="redis://127.0.0.1:9/0")
    assert done.returncode != 0 and "127.0.0.1:9" in done.stderr and "zero" not in done.stderr
    named = colabq("--env-file", "nothere.env", "status", cwd=tmp_path)
    assert named.returncode == 2 and named.stderr.splitlines() == [
        f"colabq: The settings file {tmp_path / 'nothere.env'} (--env-file, COLABQ_ENV_FILE) is "
        "not a file: name an existing one, or put the settings in "
        f"{tmp_path / 'home' / '.config' / 'colabq' / 'settings.env'}."
    ]


@pytest.mark.parametrize("argv", [["worker"], ["beat"], ["adopt", "0123abcd"]])
@pytest.mark.parametrize("where", ["file", "file/sub", "/proc/colabq-state"])
def test_commands_that_write_the_state_dir_check_it_first(
    tmp_path: Path, argv: list[str], where: str
) -> None:
    (tmp_path / "file").write_text("not a folder")
    # Redis is never reached: the state dir is refused before the command connects.
    done = colabq(
        *argv, cwd=tmp_path, COLABQ_STATE_DIR=str(tmp_path / where),
        COLABQ_REDIS_URL="redis://127.0.0.1:9/0",
    )  # fmt: skip
    line = assert_one_line(done, "COLABQ_STATE_DIR")
    assert str(tmp_path / where) in line


def test_a_worker_reads_its_settings_from_the_env_file(tmp_path: Path) -> None:
    write_private(tmp_path / "worker.env", "COLABQ_STATE_DIR=/proc/colabq-from-env-file\n")
    done = colabq(
        "--env-file", "worker.env", "worker", cwd=tmp_path, COLABQ_REDIS_URL="redis://127.0.0.1:9/0"
    )
    assert "/proc/colabq-from-env-file" in assert_one_line(done, "COLABQ_STATE_DIR")


def eta_finding(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    findings = json.loads(done.stdout)["findings"]
    return next(f for f in findings if f["check"] == "eta")


def test_preflight_reads_quiet_windows_from_the_settings_file_or_env_file(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    argv = ["preflight", "--name", GOOD_NAME, "--seconds-per-epoch", "600", "--json"]
    plain = eta_finding(colabq(*argv, cwd=repo))
    windows = 'COLABQ_QUIET_WINDOWS="Sat,Sun 00:00-24:00,daily 00:00-24:00"\n'
    write_private(repo / ".env", windows)
    unasked = eta_finding(colabq(*argv, cwd=repo))  # the cwd's .env is not read unasked
    named = eta_finding(colabq("--env-file", ".env", *argv, cwd=repo))
    write_private(repo / "home" / ".config" / "colabq" / "settings.env", windows)
    users = eta_finding(colabq(*argv, cwd=repo))
    assert plain["verdict"] == unasked["verdict"] == "pass", (plain, unasked)
    for quiet in (named, users):
        assert quiet["verdict"] == "warn" and "quiet window" in quiet["saw"], quiet


def test_preflight_with_a_bad_quiet_window_in_the_env_file_is_one_line(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    write_private(repo / ".env", "COLABQ_QUIET_WINDOWS=after lunch\n")
    done = colabq(
        "--env-file", ".env", "preflight", "--name", GOOD_NAME, "--seconds-per-epoch", "600",
        cwd=repo,
    )  # fmt: skip
    assert "after lunch" in assert_one_line(done, "COLABQ_QUIET_WINDOWS")


@pytest.mark.parametrize(
    ("var", "ending"),
    [
        ("COLABQ_HF_ENDPOINT", FIX),
        ("HF_ENDPOINT", "Fix it in the environment, or set COLABQ_HF_ENDPOINT."),
    ],
)
def test_preflight_with_an_hf_input_and_a_bad_hub_endpoint_is_one_line(
    tmp_path: Path, var: str, ending: str
) -> None:
    repo = make_repo(tmp_path)
    done = colabq(
        "preflight", "--name", GOOD_NAME, "--seconds-per-epoch", "600",
        "--hub-input", "data=hf://datasets/alice/ds/train.csv", cwd=repo, **{var: "hub.internal"},
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines() == [
        f"colabq: Invalid setting {var}: must be an http:// or https:// URL with a host "
        f"(https://huggingface.co). {ending}"
    ]
