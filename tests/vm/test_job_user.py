"""The job's own processes run as an unprivileged user on the VM (the wrapper is root there): its
folder is writable for it and colabq's files in it stay the wrapper's, its HOME is its own, the
Hub token is in none of its files, environments or processes unless the job asks for it by name,
and `timeout` still stops its whole process group at its limit."""

from __future__ import annotations

import os
import secrets
import stat
import time
from pathlib import Path

import pytest

from tests.vm.conftest import Vm

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the job's user differs from the wrapper's only when it runs as root"
)
TOKEN = "hf_vm_canary_" + secrets.token_hex(8)

# What the job says about itself and tries; every line is checked below.
WHO = """\
echo "uid: $(id -u) home: $HOME"
echo "home: $(stat -c '%u %a' "$HOME")"
mkdir -p out && echo r > out/r.txt && echo "wrote out"
mv run run.mine 2>/dev/null && echo "moved run" || echo "run: the wrapper's"
echo x >> logs/job.log 2>/dev/null && echo "wrote logs" || echo "logs: the wrapper's"
echo "token path: ${HF_TOKEN_PATH:-none}"
"""
# Looks for the token where a job can: its environment, every file it can read under its HOME
# and the VM's /content, and the environment and command line of every process it can read.
SEEK = """\
needle="$(printf '%s' "$SEEK_REV" | rev)"
hits=0
env | grep -qF -f <(echo "$needle") && { echo "hit: environment"; hits=$((hits+1)); }
for f in $(grep -rlF -f <(echo "$needle") "$HOME" "$CONTENT" /proc/[0-9]*/environ \\
    /proc/[0-9]*/cmdline 2>/dev/null); do echo "hit: $f"; hits=$((hits+1)); done
echo "hits: $hits"
"""


def _with_token(vm: Vm) -> list[str]:
    token = vm.content / ".colabq-upload-token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    vm.env.update(SEEK_REV=TOKEN[::-1], CONTENT=str(vm.content))
    return ["--token-file", str(token), "--sync", "out"]


def test_the_job_runs_as_its_own_user_and_finds_no_token(vm: Vm) -> None:
    run = vm.run(WHO + SEEK + "sleep 1\n", *_with_token(vm))
    assert run.rc == 0, run.console
    log = run.job_log
    uid = int(log.split("uid: ")[1].split()[0])
    home = vm.content / ".colabq-home" / "j1"
    assert uid != 0 and f"home: {home}" in log
    assert f"home: {uid} 700" in log  # a HOME of its own, for it alone
    assert "wrote out" in log and (vm.store / "p" / "out" / "r.txt").exists()
    assert "run: the wrapper's" in log and "logs: the wrapper's" in log
    assert "token path: none" in log and "hits: 0" in log, log
    assert TOKEN not in run.console and not (vm.content / ".colabq-upload-token").exists()
    assert (run.work / "run" / "heartbeat").exists()


def test_a_job_that_asks_for_the_token_gets_a_copy_of_its_own(vm: Vm) -> None:
    run = vm.run(
        WHO + SEEK + 'test "$(cat "$HF_TOKEN_PATH")" = "$(printf %s "$SEEK_REV" | rev)"'
        ' && echo "token: readable"\n',
        *_with_token(vm), "--job-secret", "hf_token",
    )  # fmt: skip
    assert run.rc == 0, run.console
    copy = vm.content / ".colabq-home" / "j1" / ".colabq" / "hf-token"
    assert f"token path: {copy}" in run.job_log and "token: readable" in run.job_log
    assert f"hit: {copy}" in run.job_log  # the search can find it: the first test could fail
    info = copy.stat()
    assert info.st_uid != 0 and stat.S_IMODE(info.st_mode) == 0o600


def test_timeout_stops_the_jobs_whole_process_group_at_its_limit(vm: Vm) -> None:
    marker = f"30{secrets.randbelow(10**6)}"
    t0 = time.monotonic()
    run = vm.run(f"sleep {marker} &\nsleep {marker}\n", ttl_s=2)
    assert run.rc == 124, run.console
    assert run.sentinels["TIME_LIMIT"] == "2" and run.sentinels["EXIT"] == "124"
    assert time.monotonic() - t0 < 60
    left = [
        pid
        for pid in os.listdir("/proc")
        if pid.isdigit() and marker.encode() in _cmdline(Path("/proc", pid))
    ]
    assert left == []


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""
