"""Through the real `colabq` (a subprocess, as a user runs it): an invalid setting is one line on
stderr naming its variable, exit 2, no traceback, whichever command reads it; the state dir is
checked by the commands that write it; quiet windows come from a .env file in the cwd."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.training_repo import GOOD_NAME, QUIET_ENV, make_repo

COLABQ = str(Path(sys.executable).parent / "colabq")
_OTHERS = ("XDG_STATE_HOME", "HF_ENDPOINT")  # what else the settings read


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
    assert lines[0].endswith("Fix it in the environment or .env."), lines[0]
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


def test_an_invalid_setting_in_dot_env_is_one_line(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("COLABQ_REDIS_URL=redis://127.0.0.1:6379/zero\n")
    line = assert_one_line(colabq("status", cwd=tmp_path), "COLABQ_REDIS_URL")
    assert "database 'zero'" in line


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


def eta_finding(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    findings = json.loads(done.stdout)["findings"]
    return next(f for f in findings if f["check"] == "eta")


def test_preflight_reads_quiet_windows_from_dot_env_in_the_cwd(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    argv = ["preflight", "--name", GOOD_NAME, "--seconds-per-epoch", "600", "--json"]
    plain = eta_finding(colabq(*argv, cwd=repo))
    (repo / ".env").write_text('COLABQ_QUIET_WINDOWS="Sat,Sun 00:00-24:00,daily 00:00-24:00"\n')
    quiet = eta_finding(colabq(*argv, cwd=repo))
    assert plain["verdict"] == "pass", plain
    assert quiet["verdict"] == "warn" and "quiet window" in quiet["saw"], quiet


def test_preflight_with_a_bad_quiet_window_in_dot_env_is_one_line(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (repo / ".env").write_text("COLABQ_QUIET_WINDOWS=after lunch\n")
    done = colabq("preflight", "--name", GOOD_NAME, "--seconds-per-epoch", "600", cwd=repo)
    assert "after lunch" in assert_one_line(done, "COLABQ_QUIET_WINDOWS")


@pytest.mark.parametrize(
    ("var", "ending"),
    [
        ("COLABQ_HF_ENDPOINT", "Fix it in the environment or .env."),
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
