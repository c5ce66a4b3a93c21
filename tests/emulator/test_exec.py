"""`colab exec`: live output, exit status, a killed client, serialisation, --env, self-release."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
import time

from .conftest import COLAB, Emu, plain, wait_for

WAIT_FOR_GO = """
import os, sys, time
print("first", flush=True)
deadline = time.time() + 10
while not os.path.exists("go") and time.time() < deadline:
    time.sleep(0.02)
print("second", flush=True)
"""


def test_output_streams_before_the_code_finishes(emu: Emu) -> None:
    ep = emu.new("job1")
    emu.write("live.py", WAIT_FOR_GO)
    proc = emu.popen("exec", "-s", "job1", "-f", "live.py")
    assert proc.stdout is not None
    assert proc.stdout.readline() == "first\n"
    assert proc.poll() is None, "the first line arrived while the code was still running"
    (emu.content(ep) / "go").touch()
    out, err = proc.communicate(timeout=10)
    assert (proc.returncode, out, err) == (0, "second\n", "")


def test_remote_failure_still_exits_0(emu: Emu) -> None:
    emu.new("job1")
    rc, out, err = emu.run("exec", "-s", "job1", input="print('before')\nimport sys\nsys.exit(3)\n")
    assert (rc, out) == (0, "before\n")
    assert plain(err).rstrip().endswith("SystemExit: 3")
    rc, out, err = emu.run("exec", "-s", "job1", input="raise ValueError('boom')\n")
    assert (rc, out) == (0, "")
    assert "Traceback (most recent call last)" in err
    assert plain(err).rstrip().endswith("ValueError: boom")


def test_killed_client_leaves_code_running_and_busy_stale(emu: Emu) -> None:
    ep = emu.new("job1")
    emu.write(
        "long.py",
        'import time\nprint("started", flush=True)\ntime.sleep(0.5)\n'
        'open("done.txt", "w").write("ok")\n',
    )
    proc = emu.popen("exec", "-s", "job1", "-f", "long.py")
    assert proc.stdout is not None and proc.stdout.readline() == "started\n"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=5)
    rc, out, _ = emu.run("status", "-s", "job1")
    assert rc == 0 and out.splitlines()[0].endswith("| Status: BUSY (exec(long.py))")
    assert re.fullmatch(
        r"  Last Execution: long\.py at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", out.splitlines()[1]
    )
    wait_for(lambda: (emu.content(ep) / "done.txt").exists())
    assert emu.run("status", "-s", "job1")[1].splitlines()[0].endswith("BUSY (exec(long.py))")
    assert emu.run("exec", "-s", "job1", input="print(1)")[0] == 0
    assert emu.run("status", "-s", "job1")[1].splitlines()[0].endswith("| Status: IDLE")


def test_sigint_clears_running_but_the_code_continues(emu: Emu) -> None:
    ep = emu.new("job1")
    emu.write(
        "long.py",
        'import time\nprint("started", flush=True)\ntime.sleep(0.5)\n'
        'open("done.txt", "w").write("ok")\n',
    )
    proc = emu.popen("exec", "-s", "job1", "-f", "long.py")
    assert proc.stdout is not None and proc.stdout.readline() == "started\n"
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=5) == 130
    assert emu.sessions_json()["job1"]["running"] is None
    wait_for(lambda: (emu.content(ep) / "done.txt").exists())


def test_second_exec_waits_for_the_first(emu: Emu) -> None:
    ep = emu.new("job1")
    first = (
        'import time\nopen("order.log", "a").write("a-start\\n")\nprint("a", flush=True)\n'
        'time.sleep(0.6)\nopen("order.log", "a").write("a-end\\n")\n'
    )
    emu.write("a.py", first)
    proc = emu.popen("exec", "-s", "job1", "-f", "a.py")
    assert proc.stdout is not None and proc.stdout.readline() == "a\n"
    started = time.monotonic()
    rc, out, _ = emu.run(
        "exec", "-s", "job1", input='open("order.log", "a").write("b\\n")\nprint("b")\n'
    )
    assert (rc, out) == (0, "b\n")
    assert proc.wait(timeout=10) == 0
    assert time.monotonic() - started > 0.3, "the second exec blocked behind the first"
    assert (emu.content(ep) / "order.log").read_text().splitlines() == ["a-start", "a-end", "b"]


def test_env_persists_and_colab_presets_are_set(emu: Emu) -> None:
    emu.new("job1")
    rc, out, _ = emu.run(
        "exec", "-s", "job1", "--env", "FOO=bar=baz", "--env", "EMPTY=", input="print('set')"
    )
    assert (rc, out) == (0, "set\n")
    code = (
        "import json, os\n"
        "keys = ['FOO', 'EMPTY', 'UV_SYSTEM_PYTHON', 'PYTHONPATH', 'MPLBACKEND',\n"
        "        'TBE_RUNTIME_ADDR', 'SECRET']\n"
        "print(json.dumps({k: os.environ.get(k) for k in keys}))\n"
        "print(os.getcwd())\n"
    )
    rc, out, _ = emu.run("exec", "-s", "job1", input=code, env={"SECRET": "local-only"})
    env_line, cwd = out.splitlines()
    seen = json.loads(env_line)
    assert seen["FOO"] == "bar=baz" and seen["EMPTY"] == ""
    assert (seen["UV_SYSTEM_PYTHON"], seen["PYTHONPATH"]) == ("true", "/env/python")
    assert seen["MPLBACKEND"] == "module://matplotlib_inline.backend_inline"
    assert re.fullmatch(r"127\.0\.0\.1:\d+", seen["TBE_RUNTIME_ADDR"])
    assert seen["SECRET"] is None, "the local environment does not leak onto the VM"
    assert cwd.endswith("/root/content")
    history = (emu.home / ".config/colab-cli/history/job1.jsonl").read_text()
    assert "os.environ['FOO'] = 'bar=baz'" in history, (
        "--env values land in the history in clear text"
    )


def test_env_validation_comes_first(emu: Emu) -> None:
    assert emu.run("exec", "-s", "ghost", "--env", "NOEQ", input="print(1)") == (
        2,
        "",
        "[colab] Invalid --env value 'NOEQ'. Expected KEY=VALUE.\n",
    )
    assert emu.run("exec", "-s", "ghost", "--env", "1BAD=x", input="print(1)") == (
        2,
        "",
        "[colab] Invalid --env key '1BAD'. Expected a valid environment variable name.\n",
    )


def test_empty_stdin_runs_nothing_and_a_tty_is_refused(emu: Emu) -> None:
    ep = emu.new("job1")
    assert emu.run("exec", "-s", "job1") == (0, "", "")
    assert emu.run("exec", "-s", "job1", input="  \n\n") == (0, "", "")
    assert list((emu.emu_home / "vms" / ep / "kernel" / "jobs").iterdir()) == []
    master, slave = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, str(COLAB), "exec", "-s", "job1"],
            stdin=slave,
            capture_output=True,
            text=True,
            env=emu.env,
            timeout=10,
        )
    finally:
        os.close(master)
        os.close(slave)
    assert (proc.returncode, proc.stdout) == (
        1,
        "[colab] Error: No input provided. Pipe code or provide a file.\n",
    )


def test_self_release_through_tbe_runtime_addr(emu: Emu) -> None:
    ep = emu.new("job1", "--gpu", "t4")
    code = (
        "import os, urllib.request\n"
        "url = 'http://' + os.environ['TBE_RUNTIME_ADDR'] + '/unassign'\n"
        "req = urllib.request.Request(url, method='POST')\n"
        "print(urllib.request.urlopen(req).status, flush=True)\n"
    )
    _, out, _ = emu.run("exec", "-s", "job1", input=code)
    assert out.startswith("200\n")
    wait_for(lambda: emu.run("sessions")[1] == "[colab] No active sessions found on server.\n")
    assert not (emu.emu_home / "vms" / ep).exists()
    assert emu.run("usage")[1].splitlines()[2] == "Active assignments: 0"
    assert emu.run("status", "-s", "job1")[1].endswith("[colab] Session 'job1' not found.\n")
