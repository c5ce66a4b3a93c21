"""Conformance: where the spec (or the real 0.7.4 source) says the CLI does X, the emulator does X.

The suite runs once per release the emulator speaks (`cli_version`: 0.7.4 and 0.7.5, whose
surface, messages and state handling are the same, spec §9). Every exec that ends past its
`--timeout` deadline costs 10 s (the real client's exit delay), so the cases that need one run
side by side, once per release, in the module fixture `past_deadline`; each test then checks one
of them.
"""

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from colab_emulator import ipytb
from colab_emulator.faults import set_fault
from colab_emulator.parsing import COMMANDS, NOT_EMULATED

from .conftest import Emu, make_emu, plain, tear_down, wait_for


@pytest.fixture
def emu(tmp_path: Path, cli_version: str) -> Iterator[Emu]:
    """The conftest's `emu`, speaking `cli_version`."""
    emulator = make_emu(tmp_path, cli_version)
    yield emulator
    tear_down(emulator)


DEADLINE_S = 3.0
# "stopped" must still be waiting for its deadline when `colab stop` has removed its record
# (on a loaded host the stop comes seconds after the execs start): its write-back comes after.
STOPPED_DEADLINE_S = 12.0
EXIT_DELAY_S = 10.0
LOST = "RuntimeError: Connection was lost."
TIMED_OUT = "TimeoutError: Timeout waiting for reply"
DELAY_LOG = "Failed to stop websocket connection thread."
RULE = "\x1b[0;31m" + "-" * 75 + "\x1b[0m"
LONG = 'import time\nprint("started", flush=True)\ntime.sleep(30)\n'
CHATTY = "import time\nfor i in range(8):\n    print(i, flush=True)\n    time.sleep(0.5)\n"
WAIT_FOR_GO = (
    "import os, time\n"
    'print("first", flush=True)\n'
    "deadline = time.time() + 20\n"
    'while not os.path.exists("go") and time.time() < deadline:\n'
    "    time.sleep(0.02)\n"
    'print("second", flush=True)\n'
    'open("done.txt", "w").write("ok")\n'
)


def log_text(emu: Emu) -> str:
    path = emu.home / ".config" / "colab-cli" / "colab.log"
    return path.read_text() if path.exists() else ""


def alive(pid: int) -> bool:
    """Running (a zombie left for a non-reaping PID 1 counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------
# Execs that end past their deadline: run side by side, once.


@dataclass
class Outcome:
    rc: int
    out: str
    err: str
    elapsed: float
    extra: dict[str, Any]

    @property
    def last_err(self) -> str:
        return self.err.splitlines()[-1] if self.err else ""


SCENARIOS = {
    # name: (script, expected first line or None)
    "unassigned": (LONG, "started\n"),
    "unassigned_timeout": (LONG, "started\n"),
    "stopped": (LONG, "started\n"),
    "dropped": (WAIT_FOR_GO, "first\n"),
    "restarted": (LONG, "started\n"),
    "killed_kernel": (LONG, "started\n"),
    "hang": ("open('ran', 'w')\n", None),
    "flowing": (CHATTY, "0\n"),
}


def _run_past_deadline(emu: Emu, solo: Emu) -> dict[str, Outcome]:
    # "stopped" reads its record back from sessions.json: it runs on an emulator of its own, so
    # no other client here writes the file back from a stale copy (the real CLI's lost-update
    # race, which the emulator reproduces) between its exec's write-back and the read.
    emus = {name: solo if name == "stopped" else emu for name in SCENARIOS}
    eps = {name: emus[name].new(name) for name in SCENARIOS}
    set_fault(emu.emu_home, "exec", on_lost="timeout", match_session="unassigned_timeout")
    set_fault(emu.emu_home, "exec", hang=True, match_session="hang")
    procs, started, first = {}, {}, {}
    for name, (script, _) in SCENARIOS.items():
        emus[name].write(f"{name}.py", script)
        started[name] = time.monotonic()
        procs[name] = emus[name].popen(
            "exec", "-s", name, "--timeout", str(_deadline(name)), "-f", f"{name}.py"
        )
    for name, (_, line) in SCENARIOS.items():
        stdout = procs[name].stdout
        assert stdout is not None
        first[name] = stdout.readline() if line else ""
        assert first[name] == (line or ""), name
    extra: dict[str, dict[str, Any]] = {name: {} for name in SCENARIOS}
    # Each VM goes away, or its kernel, or its connection, while the client is attached.
    assert emu.admin("unassign", eps["unassigned"])[0] == 0
    assert emu.admin("unassign", eps["unassigned_timeout"])[0] == 0
    extra["stopped"]["record"] = solo.sessions_json()["stopped"]
    stop = solo.run("stop", "-s", "stopped")
    assert stop[0] == 0
    # What stop did, from its own output: the abandoned exec may write its record back at once.
    extra["stopped"]["after_stop"] = "Session terminated." not in stop[1]
    assert emu.admin("drop-connections", eps["dropped"])[0] == 0
    time.sleep(0.1)  # the client notices within one poll (20 ms)
    (emu.content(eps["dropped"]) / "go").touch()
    wait_for(lambda: (emu.content(eps["dropped"]) / "done.txt").exists())
    later = emu.run("exec", "-s", "dropped", input="print('later client')")
    extra["dropped"]["later"] = later
    extra["restarted"]["restart"] = emu.run("restart-kernel", "-s", "restarted")
    assert emu.admin("kill-kernel", eps["killed_kernel"])[0] == 0
    outcomes = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=60)
        outcomes[name] = Outcome(
            proc.returncode, first[name] + out, err, time.monotonic() - started[name], extra[name]
        )
    outcomes["hang"].extra["ran"] = (emu.content(eps["hang"]) / "ran").exists()
    sessions = {**emu.sessions_json(), "stopped": solo.sessions_json().get("stopped")}
    for name, outcome in outcomes.items():
        outcome.extra["record_after"] = sessions.get(name)
    outcomes["flowing"].extra["log"] = log_text(emu) + log_text(solo)
    return outcomes


@pytest.fixture(scope="module")
def past_deadline(
    tmp_path_factory: pytest.TempPathFactory, cli_version: str
) -> Iterator[dict[str, Outcome]]:
    emu = make_emu(tmp_path_factory.mktemp("past-deadline"), cli_version)
    solo = make_emu(tmp_path_factory.mktemp("past-deadline-solo"), cli_version)
    try:
        yield _run_past_deadline(emu, solo)
    finally:
        tear_down(emu)
        tear_down(solo)


def _deadline(name: str) -> float:
    return STOPPED_DEADLINE_S if name == "stopped" else DEADLINE_S


def _failed_late(outcome: Outcome, last_line: str, deadline_s: float = DEADLINE_S) -> None:
    assert outcome.rc == 1, outcome.err
    assert outcome.last_err == last_line
    assert outcome.err.startswith("Traceback (most recent call last):")
    assert outcome.elapsed >= deadline_s + EXIT_DELAY_S, "waited for the deadline, then 10 s more"
    assert outcome.elapsed < deadline_s + EXIT_DELAY_S + 15


def test_vm_unassigned_under_exec_fails_only_at_the_deadline(
    past_deadline: dict[str, Outcome],
) -> None:
    outcome = past_deadline["unassigned"]
    _failed_late(outcome, LOST)
    assert outcome.out == "started\n", "what the VM wrote before it went away was streamed"
    assert outcome.extra["record_after"]["running"] is None


def test_on_lost_timeout_fault_gives_timeout_error(past_deadline: dict[str, Outcome]) -> None:
    _failed_late(past_deadline["unassigned_timeout"], TIMED_OUT)


def test_stopped_session_record_is_recreated_by_the_abandoned_exec(
    past_deadline: dict[str, Outcome],
) -> None:
    outcome = past_deadline["stopped"]
    _failed_late(outcome, LOST, STOPPED_DEADLINE_S)
    assert outcome.extra["after_stop"] is False, "stop removed the record"
    before, after = outcome.extra["record"], outcome.extra["record_after"]
    assert after is not None, "the exec's finally wrote its record back (store.add)"
    assert after == {**before, "running": None}, "the record as read at start, token included"
    assert after["last_execution"][0] == "stopped.py"


def test_dropped_connection_loses_output_but_the_code_goes_on(
    past_deadline: dict[str, Outcome],
) -> None:
    outcome = past_deadline["dropped"]
    _failed_late(outcome, LOST)
    assert outcome.out == "first\n", "nothing after the drop reached the client"
    assert outcome.extra["later"] == (0, "later client\n", ""), "a client attached later is fine"


def test_restart_kernel_leaves_an_attached_exec_without_reply(
    past_deadline: dict[str, Outcome],
) -> None:
    outcome = past_deadline["restarted"]
    assert outcome.extra["restart"] == (0, "", "")
    _failed_late(outcome, TIMED_OUT)


def test_dead_kernel_makes_exec_wait_for_its_deadline(past_deadline: dict[str, Outcome]) -> None:
    outcome = past_deadline["killed_kernel"]
    _failed_late(outcome, TIMED_OUT)
    assert outcome.extra["record_after"]["running"] is None, "finally cleared running"


def test_hang_fault_times_out_without_running(past_deadline: dict[str, Outcome]) -> None:
    outcome = past_deadline["hang"]
    _failed_late(outcome, TIMED_OUT)
    assert outcome.out == "" and outcome.extra["ran"] is False


def test_output_past_the_deadline_streams_then_exits_0_ten_seconds_late(
    past_deadline: dict[str, Outcome],
) -> None:
    outcome = past_deadline["flowing"]
    assert (outcome.rc, outcome.out, outcome.err) == (0, "".join(f"{i}\n" for i in range(8)), "")
    assert outcome.elapsed >= 4.0 + EXIT_DELAY_S
    assert outcome.elapsed < 4.0 + EXIT_DELAY_S + 15


def test_every_exec_past_its_deadline_logs_the_websocket_thread_failure(
    past_deadline: dict[str, Outcome],
) -> None:
    log = past_deadline["flowing"].extra["log"]
    assert log.count(DELAY_LOG) == len(SCENARIOS)
    assert all(
        f"DEBUG colab_cli: {DELAY_LOG}" in line for line in log.splitlines() if DELAY_LOG in line
    )


# ---------------------------------------------------------------------------------------------
# Execs that end in time: no delay.


def test_exec_within_its_deadline_has_no_exit_delay(emu: Emu) -> None:
    emu.new("job1")
    started = time.monotonic()
    assert emu.run("exec", "-s", "job1", "--timeout", "5", input="print(1)") == (0, "1\n", "")
    assert time.monotonic() - started < 4
    assert DELAY_LOG not in log_text(emu)


def test_abandoned_exec_interrupted_writes_the_record_back(emu: Emu) -> None:
    emu.new("job1")
    emu.write("long.py", LONG)
    proc = emu.popen("exec", "-s", "job1", "-f", "long.py")
    assert proc.stdout is not None and proc.stdout.readline() == "started\n"
    before = emu.sessions_json()["job1"]
    assert emu.run("stop", "-s", "job1")[0] == 0
    assert "job1" not in emu.sessions_json()
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=10) == 130, "SIGINT runs finally"
    assert emu.sessions_json()["job1"] == {**before, "running": None}
    rc, out, _ = emu.run("status")
    assert (rc, out) == (
        0,
        "[colab] Pruned 1 stale local session(s).\n[colab] No active sessions.\n",
    )


def test_abandoned_exec_terminated_writes_nothing_back(emu: Emu) -> None:
    emu.new("job1")
    emu.write("long.py", LONG)
    proc = emu.popen("exec", "-s", "job1", "-f", "long.py")
    assert proc.stdout is not None and proc.stdout.readline() == "started\n"
    assert emu.run("stop", "-s", "job1")[0] == 0
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 143
    assert emu.sessions_json() == {}


def test_exec_resolves_the_session_before_reading_the_code(emu: Emu) -> None:
    not_found = (1, "[colab] Session 'ghost' not found.\n", "")
    assert emu.run("exec", "-s", "ghost") == not_found, "even with empty stdin"
    assert emu.run("exec", "-s", "ghost", "-f", "missing.py") == not_found
    emu.new("job1")
    rc, out, err = emu.run("exec", "-s", "job1", "-f", "missing.py")
    assert (rc, out) == (1, "")
    assert err.splitlines()[-1] == (
        "FileNotFoundError: [Errno 2] No such file or directory: 'missing.py'"
    )


def test_running_and_last_execution_name_the_file_as_given(emu: Emu) -> None:
    emu.new("job1")
    (emu.workdir / "sub").mkdir()
    emu.write("sub/job.py", LONG)
    proc = emu.popen("exec", "-s", "job1", "-f", "sub/job.py")
    assert proc.stdout is not None and proc.stdout.readline() == "started\n"
    proc.kill()
    proc.wait()
    lines = emu.run("status", "-s", "job1")[1].splitlines()
    assert lines[0].endswith("| Status: BUSY (exec(sub/job.py))")
    assert lines[1].startswith("  Last Execution: sub/job.py at ")


# ---------------------------------------------------------------------------------------------
# Exceptions in exec code: IPython's traceback, as the CLI prints the `error` output.


def test_exception_is_printed_as_ipython_verbose_traceback(emu: Emu) -> None:
    emu.new("job1")
    code = "print('out')\ndef f(x):\n    return {}[x]\nf('k')\n"
    rc, out, err = emu.run("exec", "-s", "job1", input=code)
    assert (rc, out) == (0, "out\n")
    assert plain(err) == (
        "-" * 75
        + "KeyError"
        + "Traceback (most recent call last)".rjust(75 - len("KeyError"))
        + "Cell In[2], line 4\n"
        + "      2 def f(x):\n"
        + "      3     return {}[x]\n"
        + "----> 4 f('k')\n"
        + "Cell In[2], line 3, in f(x)\n"
        + "      2 def f(x):\n"
        + "----> 3     return {}[x]\n"
        + "KeyError: 'k'\n"
    )
    assert err.startswith(RULE + "\x1b[0;31mKeyError\x1b[0m" + " " * 34 + "Traceback")
    assert "Traceback (most recent call last)Cell \x1b[0;32mIn[2], line 4\x1b[0m\n" in err
    assert "Cell \x1b[0;32mIn[2], line 3\x1b[0m, in \x1b[0;36mf\x1b[0;34m(x)\x1b[0m\n" in err
    assert (
        "\x1b[1;32m      2\x1b[0m \x1b[38;5;28;01mdef\x1b[39;00m\x1b[38;5;250m \x1b[39m"
        "\x1b[38;5;21mf\x1b[39m(x):\n"
    ) in err
    assert (
        "\x1b[0;32m----> 4\x1b[0m f(\x1b[38;5;124m'\x1b[39m\x1b[38;5;124mk\x1b[39m"
        "\x1b[38;5;124m'\x1b[39m)\n"
    ) in err
    assert err.endswith("\x1b[0;31mKeyError\x1b[0m: 'k'\n")
    # The kernel counts the CLI's /content prelude and the cell: the next cell is In[4]; the
    # --env prelude is part of the cell, so it shifts the line numbers.
    rc, _, err = emu.run("exec", "-s", "job1", "--env", "A=1", input="raise ValueError('v')\n")
    assert rc == 0 and "Cell In[4], line 3\n" in plain(err)
    assert "      2 os.environ['A'] = '1'\n----> 3 raise ValueError('v')\n" in plain(err)


def test_system_exit_keeps_ipython_exception_only_form(emu: Emu) -> None:
    emu.new("job1")
    note = "An exception has occurred, use %tb to see the full traceback.\n"
    assert emu.run("exec", "-s", "job1", input="import sys\nsys.exit(3)\n") == (
        0,
        "",
        note + "\x1b[0;31mSystemExit\x1b[0m\x1b[0;31m:\x1b[0m 3\n\n",
    )
    assert emu.run("exec", "-s", "job1", input="import sys\nsys.exit()\n") == (
        0,
        "",
        note + "\x1b[0;31mSystemExit\x1b[0m\n\n",
    )


def test_syntax_error_is_printed_like_ipython(emu: Emu) -> None:
    emu.new("job1")
    rc, out, err = emu.run("exec", "-s", "job1", input="x = 1\ny = (1,\n")
    assert (rc, out) == (0, "")
    assert err.startswith(
        "\x1b[0;36m  Cell \x1b[0;32mIn[2], line 2\x1b[0;36m\x1b[0m\n"
        "\x1b[0;31m    y = (1,\x1b[0m\n"
        "\x1b[0m        ^\x1b[0m\n"
        "\x1b[0;31mSyntaxError\x1b[0m\x1b[0;31m:\x1b[0m "
    )
    assert err.endswith("\n\n")


def _raise_chained() -> None:
    try:
        {}["k"]
    except KeyError as exc:
        raise ValueError("wrapped") from exc


def test_chained_exceptions_come_first_with_less_context() -> None:
    try:
        _raise_chained()
    except ValueError as exc:
        text = plain(ipytb.render(exc, "verbose", {}))
    first, rest = text.split(ipytb.DIRECT_CAUSE)
    assert first.startswith("-" * 75 + "KeyError") and first.endswith("KeyError: 'k'")
    assert "ValueError" + "Traceback (most recent call last)".rjust(65) in rest
    assert rest.endswith("ValueError: wrapped\n")
    # The chained (older) exception shows one line either side, the raised one two.
    assert len([line for line in first.splitlines() if re.match(r"^[- >]+\d+ ", line)]) == 3


def _recurse(n: int) -> int:
    return _recurse(n + 1)


def test_recursion_is_collapsed_like_stack_data() -> None:
    try:
        _recurse(0)
    except RecursionError as exc:
        text = plain(ipytb.render(exc, "verbose", {}))
    assert re.search(
        r"\[\.\.\. skipping similar frames: _recurse at line \d+ \(\d+ times\)\]", text
    )
    assert text.endswith("RecursionError: maximum recursion depth exceeded\n")
    assert text.count("in _recurse(n)") == 3, "first, second and last of the run are shown"


def test_vm_files_are_named_by_their_vm_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLAB_EMU_VM_ROOT", "/x/vms/ep/root")
    assert ipytb.display_path("/x/vms/ep/root/content/mod.py") == "/content/mod.py"
    assert ipytb.display_path("/x/vms/ep/root/root/lib.py") == "~/lib.py"
    assert (
        ipytb.display_path("/usr/lib/python3/json/decoder.py") == "/usr/lib/python3/json/decoder.py"
    )


def test_source_lines_are_coloured_like_pygments_terminal256() -> None:
    pygments = pytest.importorskip("pygments")
    from pygments.formatters.terminal256 import Terminal256Formatter
    from pygments.lexers import get_lexer_by_name
    from pygments.styles import get_style_by_name

    formatter = Terminal256Formatter(style=get_style_by_name("default"))
    sources = [Path(ipytb.__file__).read_text(), Path(__file__).read_text()]
    sources.append(
        "import a.b as c, d\nfrom .e import (f)\n@deco\nasync def g(self, *a, **k) -> int:\n"
        '    """Doc."""\n    # note\n    s = f"{a!r:>3} {{x}} {b + 1}\\n" + r\'\\d\' + b"%s{0}"\n'
        "    if x is not None and x in [1.5, 0x1F, 1_000]:\n"
        "        raise ValueError('boom') from e\n    return __name__, __init__, True, ...\n"
        "match cmd:\n    case [x, _]:\n        pass\n"
    )
    for source in sources:
        expected = pygments.highlight(
            source, get_lexer_by_name("python3", stripnl=False), formatter
        ).splitlines()
        assert ipytb.highlight(source) == expected


# ---------------------------------------------------------------------------------------------
# restart-kernel


def test_restart_kernel_is_a_command_now() -> None:
    assert "restart-kernel" in COMMANDS and "restart-kernel" not in NOT_EMULATED


def test_restart_kernel_unknown_session_is_not_found_exit_1(emu: Emu) -> None:
    assert emu.run("restart-kernel", "-s", "ghost") == (
        1,
        "[colab] Session 'ghost' not found.\n",
        "",
    )
    rc, out, _ = emu.run("restart-kernel", "-h")
    assert rc == 0 and "Usage: colab restart-kernel [OPTIONS]" in out
    rc, out, _ = emu.run("-h")
    assert "restart-kernel" in out


def test_restart_kernel_kills_the_stale_cell_but_not_detached_jobs(emu: Emu) -> None:
    ep = emu.new("job1")
    detach = (
        "import subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
        " start_new_session=True)\n"
        "open('detached.pid', 'w').write(str(p.pid))\n"
    )
    assert emu.run("exec", "-s", "job1", "--env", "KEPT=1", input=detach)[0] == 0
    stale = (
        "import os, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "open('cell.pid', 'w').write(f'{os.getpid()} {child.pid}')\n"
        "print('started', flush=True)\ntime.sleep(60)\n"
    )
    emu.write("stale.py", stale)
    proc = emu.popen("exec", "-s", "job1", "-f", "stale.py")
    assert proc.stdout is not None and proc.stdout.readline() == "started\n"
    proc.kill()
    proc.wait()
    content = emu.content(ep)
    cell, child = map(int, (content / "cell.pid").read_text().split())
    detached = int((content / "detached.pid").read_text())
    server = json.loads((emu.emu_home / "vms" / ep / "vm.json").read_text())["pid"]
    assert emu.run("restart-kernel", "-s", "job1") == (0, "", "")
    wait_for(lambda: not alive(cell) and not alive(child))
    assert alive(detached), "a job that left the kernel's session survives"
    assert alive(server), "so does the runtime server"
    status = emu.run("status", "-s", "job1")[1].splitlines()[0]
    assert status.endswith("| Status: BUSY (exec(stale.py))"), "running is not cleared"
    started = time.monotonic()
    rc, out, err = emu.run(
        "exec", "-s", "job1", input="import os\nprint(os.environ.get('KEPT'))\nraise KeyError(1)"
    )
    assert time.monotonic() - started < 3, "the kernel lock is free: it ran at once"
    assert (rc, out) == (0, "None\n"), "the new kernel lost the old one's --env values"
    assert "Cell In[2], line 3" in plain(err), "and its execution counter"


def test_restart_kernel_starts_a_kernel_when_the_record_has_none(emu: Emu) -> None:
    emu.new("job1")
    assert emu.sessions_json()["job1"]["kernel_id"] is None
    assert emu.run("restart-kernel", "-s", "job1") == (0, "", "")
    record = emu.sessions_json()["job1"]
    assert record["kernel_id"] and record["session_id"]
    kernel_id = record["kernel_id"]
    assert emu.run("restart-kernel", "-s", "job1") == (0, "", "")
    assert emu.sessions_json()["job1"]["kernel_id"] == kernel_id


def test_restart_kernel_on_a_vanished_vm_is_a_404_traceback(emu: Emu) -> None:
    ep = emu.new("job1")
    assert emu.admin("unassign", ep)[0] == 0
    rc, out, err = emu.run("restart-kernel", "-s", "job1")
    assert (rc, out) == (1, "")
    assert err.splitlines()[-1] == (
        "requests.exceptions.HTTPError: 404 Client Error: Not Found for url: "
        f"https://8080-{ep}.prod.colab.dev/api/kernels"
    )
    assert "job1" in emu.sessions_json(), "no cleanup: restart-kernel keeps the record"


# ---------------------------------------------------------------------------------------------
# get_session: refresh on a missing expiry, copying token, url and expiry; prune when gone.


def _hand_record(name: str, endpoint: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "token": "",
        "url": "",
        "endpoint": endpoint,
        "token_expires_at": None,
        "variant": "DEFAULT",
        "accelerator": "NONE",
        "machine_shape": "STANDARD",
        **fields,
    }


def test_hand_written_record_in_another_config_is_adopted(emu: Emu) -> None:
    ep = emu.new("job1")
    other = emu.workdir / "adopted.json"
    other.write_text(json.dumps({"job1": _hand_record("job1", ep)}))
    cfg = ("--config", str(other))
    code = "open('made.txt', 'w').write('hi')\nprint('ran')\n"
    assert emu.run(*cfg, "exec", "-s", "job1", input=code) == (0, "ran\n", "")
    adopted, original = emu.sessions_json(other)["job1"], emu.sessions_json()["job1"]
    for field in ("token", "url", "endpoint"):
        assert adopted[field] == original[field]
    assert adopted["token_expires_at"] and adopted["kernel_id"] and adopted["running"] is None
    rc, out, _ = emu.run(*cfg, "download", "-s", "job1", "/content/made.txt", "made.txt")
    assert (rc, out) == (0, "[colab] Downloaded '/content/made.txt' to 'made.txt'\n")
    assert (emu.workdir / "made.txt").read_text() == "hi"
    assert emu.run(*cfg, "stop", "-s", "job1") == (
        0,
        "[colab] Stopping session 'job1'...\n[colab] Session terminated.\n",
        "",
    )
    assert emu.sessions_json(other) == {}
    assert emu.run("sessions")[1] == (
        "[colab] Pruned 1 stale local session(s).\n[colab] No active sessions found on server.\n"
    ), "the VM is gone for the original host too"


@pytest.mark.parametrize(
    "argv",
    [
        ("upload", "-s", "job1", "local.txt", "/content/up.txt"),
        ("ls", "-s", "job1"),
        ("restart-kernel", "-s", "job1"),
    ],
)
def test_other_commands_work_on_a_hand_written_record(emu: Emu, argv: tuple[str, ...]) -> None:
    ep = emu.new("job1")
    emu.write("local.txt", "x")
    other = emu.workdir / "adopted.json"
    other.write_text(json.dumps({"job1": _hand_record("job1", ep)}))
    assert emu.run("--config", str(other), *argv)[0] == 0
    assert emu.sessions_json(other)["job1"]["url"] == emu.sessions_json()["job1"]["url"]


def test_refresh_within_five_minutes_copies_the_url_too(emu: Emu) -> None:
    ep = emu.new("job1")
    config = emu.home / ".config" / "colab-cli" / "sessions.json"
    real_url = emu.sessions_json()["job1"]["url"]

    def expiring_in(seconds: int) -> None:
        data = emu.sessions_json()
        when = datetime.now(UTC) + timedelta(seconds=seconds)
        data["job1"].update(url="https://stale.example", token_expires_at=when.isoformat())
        config.write_text(json.dumps(data))

    expiring_in(3600)
    assert emu.run("ls", "-s", "job1")[0] == 0
    assert emu.sessions_json()["job1"]["url"] == "https://stale.example", "far from expiry"
    expiring_in(120)
    assert emu.run("ls", "-s", "job1")[0] == 0
    assert emu.sessions_json()["job1"]["url"] == real_url
    assert emu.sessions_json()["job1"]["endpoint"] == ep


def test_refresh_prunes_a_record_whose_vm_is_gone(emu: Emu) -> None:
    config = emu.home / ".config" / "colab-cli" / "sessions.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"gone": _hand_record("gone", "cpu-0000000000")}))
    assert emu.run("exec", "-s", "gone", input="print(1)") == (
        1,
        "[colab] Session 'gone' not found.\n",
        "",
    )
    assert emu.sessions_json() == {}
    history = (emu.home / ".config/colab-cli/history/gone.jsonl").read_text()
    assert '"reason": "pruned"' in history


def test_a_record_the_real_model_rejects_empties_the_whole_file(emu: Emu) -> None:
    ep = emu.new("job1")
    config = emu.home / ".config" / "colab-cli" / "sessions.json"
    data = emu.sessions_json()
    data["bad"] = {"name": "bad", "endpoint": ep}  # no token, no url
    config.write_text(json.dumps(data))
    assert emu.run("status") == (0, "[colab] No active sessions.\n", "")
    assert emu.run("ls", "-s", "job1") == (1, "[colab] Session 'job1' not found.\n", "")


# ---------------------------------------------------------------------------------------------
# Billing


def _billing(emu: Emu) -> list[dict[str, Any]]:
    rc, out, _ = emu.admin("billing", "--json")
    assert rc == 0
    return list(json.loads(out))


def test_billing_record_for_every_way_an_assignment_ends(emu: Emu) -> None:
    emu.env["COLAB_EMU_TIME_SCALE"] = "3600"  # one real second bills one hour
    eps = {name: emu.new(name, "--gpu", "t4") for name in ("stopped", "released", "reclaimed")}
    ep_cpu = emu.new("cpu")
    open_records = _billing(emu)
    assert {r["endpoint"] for r in open_records} == {*eps.values(), ep_cpu}
    assert all(r["unassigned_at"] is None and r["seconds"] > 0 for r in open_records)
    assert emu.run("stop", "-s", "stopped")[0] == 0
    release = (
        "import os, urllib.request\n"
        "url = 'http://' + os.environ['TBE_RUNTIME_ADDR'] + '/unassign'\n"
        "urllib.request.urlopen(urllib.request.Request(url, method='POST'))\n"
    )
    assert emu.run("exec", "-s", "released", input=release)[0] == 0
    wait_for(lambda: len((emu.emu_home / "billing.jsonl").read_text().splitlines()) == 2)
    assert emu.admin("unassign", eps["reclaimed"])[0] == 0
    assert emu.admin("kill-all")[0] == 0
    lines = (emu.emu_home / "billing.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["endpoint"] for r in records] == [*eps.values(), ep_cpu]
    assert _billing(emu) == records, "nothing open any more"
    for record in records:
        assert set(record) == {
            "endpoint",
            "accelerator",
            "assigned_at",
            "unassigned_at",
            "seconds",
            "units",
        }
        assert record["seconds"] == pytest.approx(record["unassigned_at"] - record["assigned_at"])
        rate = 1.76 if record["endpoint"] in eps.values() else 0.07
        assert record["units"] == pytest.approx(rate * record["seconds"] * 3600 / 3600)
    assert records[-1]["accelerator"] == "NONE"
    server = json.loads((emu.emu_home / "server.json").read_text())
    assert server["balance"] == pytest.approx(100.0 - sum(r["units"] for r in records), abs=1e-6)


def test_billing_text_lists_open_assignments(emu: Emu) -> None:
    ep = emu.new("job1", "--gpu", "t4")
    rc, out, _ = emu.admin("billing")
    assert rc == 0
    row = next(line for line in out.splitlines() if line.startswith(ep))
    assert " T4 " in row and "(open)" in row
    assert out.splitlines()[-1].startswith("Total: 1 assignment(s), 1 open, ")


def test_balance_floors_at_zero_and_allocation_still_works(emu: Emu) -> None:
    emu.env["COLAB_EMU_TIME_SCALE"] = "3600"
    assert emu.admin("set-balance", "0.5")[0] == 0
    emu.new("big", "--gpu", "h100")
    time.sleep(0.3)  # 15.04 units an hour: more than 0.5 in 0.3 s at this scale
    assert emu.run("stop", "-s", "big")[0] == 0
    assert json.loads((emu.emu_home / "server.json").read_text())["balance"] == 0.0
    rc, out, _ = emu.run("new", "-s", "broke", "--gpu", "t4")
    assert rc == 0 and out.endswith("[colab] Session READY.\n"), "the backend's answer is UNKNOWN"
    assert emu.run("usage")[1].splitlines() == [
        "Current balance: 0.00 compute units",
        "Usage rate: 1.76/hr",
        "Active assignments: 1",
    ]


def test_drop_connections_needs_an_assigned_vm(emu: Emu) -> None:
    rc, _, err = emu.admin("drop-connections", "cpu-0000000000")
    assert rc == 1 and "not assigned" in err
