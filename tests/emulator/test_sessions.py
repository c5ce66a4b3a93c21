"""Allocation and session bookkeeping: new, status, sessions, stop, usage, resolve_session."""

from __future__ import annotations

import json
import re
import time

import pytest

from .conftest import Emu

LINE = re.compile(
    r"^\[(\S+)\] ((?:gpu|tpu|cpu)-[0-9a-f]{10}) "
    r"\| Hardware: (\S+) \| Shape: (\S+) \| Variant: (\S+)"
)


def test_new_prints_creating_and_ready_and_writes_the_record(emu: Emu) -> None:
    rc, out, err = emu.run("new", "-s", "job1", "--gpu", "T4")
    assert (rc, out, err) == (0, "[colab] Creating session 'job1'...\n[colab] Session READY.\n", "")
    record = emu.sessions_json()["job1"]
    assert set(record) == {
        "name",
        "token",
        "url",
        "endpoint",
        "token_expires_at",
        "variant",
        "accelerator",
        "machine_shape",
        "kernel_id",
        "session_id",
        "last_execution",
        "running",
    }
    assert re.fullmatch(r"gpu-[0-9a-f]{10}", record["endpoint"])
    assert (record["variant"], record["accelerator"], record["machine_shape"]) == (
        "GPU",
        "T4",
        "STANDARD",
    )
    history = (emu.home / ".config/colab-cli/history/job1.jsonl").read_text().splitlines()
    assert json.loads(history[0])["event_type"] == "session_created"


@pytest.mark.parametrize(
    ("flags", "hardware", "shape", "variant", "notice"),
    [
        (["--gpu", "l4", "--high-mem"], "L4", "Standard", "GPU", True),
        (["--gpu", "t4", "--high-mem"], "T4", "High-RAM", "GPU", False),
        (["--gpu", "bogus"], "A100", "Standard", "GPU", False),
        (["--tpu", "v5e1", "--gpu", "t4"], "V5E1", "Standard", "TPU", False),
        (["--tpu", "whatever", "--high-mem"], "V6E1", "Standard", "TPU", True),
        ([], "CPU", "Standard", "DEFAULT", False),
    ],
)
def test_new_flag_mapping(
    emu: Emu, flags: list[str], hardware: str, shape: str, variant: str, notice: bool
) -> None:
    rc, out, err = emu.run("new", "-s", "n", *flags)
    assert rc == 0 and out.endswith("[colab] Session READY.\n")
    ignored = "[colab] --high-mem ignored: this accelerator only offers one machine shape.\n"
    assert err == (ignored if notice else "")
    rc, out, _ = emu.run("status", "-s", "n")
    match = LINE.match(out)
    assert match and match.groups()[2:] == (hardware, shape, variant)
    assert out.rstrip().endswith("| Status: IDLE")


def test_new_without_a_name_uses_six_hex(emu: Emu) -> None:
    rc, out, _ = emu.run("new")
    assert rc == 0
    assert re.match(r"\[colab\] Creating session '[0-9a-f]{6}'\.\.\.\n", out)


def test_status_shows_busy_and_last_execution(emu: Emu) -> None:
    emu.new("kept")
    config = emu.home / ".config/colab-cli/sessions.json"
    data = json.loads(config.read_text())
    data["kept"]["running"] = "exec(long.py)"
    data["kept"]["last_execution"] = ["long.py", None, "2026-12-02 10:24:54"]
    config.write_text(json.dumps(data, indent=2))
    rc, out, _ = emu.run("status")
    assert rc == 0
    first, second = out.splitlines()
    assert first.startswith("[kept] cpu-") and first.endswith(
        "| Hardware: CPU | Shape: Standard | Variant: DEFAULT | Status: BUSY (exec(long.py))"
    )
    assert second == "  Last Execution: long.py at 2026-12-02 10:24:54"


def test_not_found_is_exit_0_for_status_and_stop_but_1_elsewhere(emu: Emu) -> None:
    line = "[colab] Session 'ghost' not found.\n"
    assert emu.run("status", "-s", "ghost") == (0, line, "")
    assert emu.run("stop", "-s", "ghost") == (0, line, "")
    assert emu.run("exec", "-s", "ghost", input="print(1)") == (1, line, "")
    assert emu.run("upload", "-s", "ghost", "x", "/content/x") == (1, line, "")
    assert emu.run("ls", "-s", "ghost") == (1, line, "")


def test_sessions_lists_server_side_with_question_marks(emu: Emu) -> None:
    assert emu.run("sessions") == (0, "[colab] No active sessions found on server.\n", "")
    ep = emu.new("job1", "--gpu", "t4")
    rc, orphan, _ = emu.admin("orphan", "--gpu", "T4")
    other_config = emu.workdir / "other.json"
    assert emu.run("--config", str(other_config), "new", "-s", "elsewhere")[0] == 0
    elsewhere = emu.sessions_json(other_config)["elsewhere"]["endpoint"]
    rc, out, _ = emu.run("sessions")
    assert rc == 0
    assert out.splitlines() == [
        f"[job1] {ep} | Hardware: T4 | Shape: Standard | Variant: GPU",
        f"[?] {orphan.strip()} | Hardware: T4 | Shape: Standard | Variant: GPU",
        f"[?] {elsewhere} | Hardware: CPU | Shape: Standard | Variant: DEFAULT",
    ]
    rc, out, _ = emu.run("--config", str(other_config), "sessions")
    assert f"[elsewhere] {emu.sessions_json(other_config)['elsewhere']['endpoint']}" in out
    assert f"[?] {ep}" in out


def test_stop_unassigns_and_is_idempotent(emu: Emu) -> None:
    ep = emu.new("job1", "--gpu", "t4")
    assert emu.run("stop", "-s", "job1") == (
        0,
        "[colab] Stopping session 'job1'...\n[colab] Session terminated.\n",
        "",
    )
    assert "job1" not in emu.sessions_json()
    assert not (emu.emu_home / "vms" / ep).exists()
    assert emu.run("sessions")[1] == "[colab] No active sessions found on server.\n"
    assert emu.run("stop", "-s", "job1") == (0, "[colab] Session 'job1' not found.\n", "")


def test_resolve_session_without_s(emu: Emu) -> None:
    none = "[colab] Error: No active sessions found. Create one with 'colab new'.\n"
    assert emu.run("stop") == (1, none, "")
    emu.new("a")
    rc, out, _ = emu.run("ls")
    assert rc == 0 and out.splitlines() == ["[colab] Using unique session 'a'.", "sample_data/"]
    emu.new("b")
    rc, out, _ = emu.run("stop")
    assert (rc, out) == (
        1,
        "[colab] Error: Multiple active sessions found. Specify one with -s: a, b\n",
    )


def test_status_prunes_records_whose_vm_is_gone(emu: Emu) -> None:
    ep = emu.new("gone")
    emu.new("alive")
    assert emu.admin("unassign", ep)[0] == 0
    rc, out, _ = emu.run("status", "-s", "gone")
    assert (rc, out) == (
        0,
        "[colab] Pruned 1 stale local session(s).\n[colab] Session 'gone' not found.\n",
    )
    assert set(emu.sessions_json()) == {"alive"}
    events = (emu.home / ".config/colab-cli/history/gone.jsonl").read_text()
    assert '"reason": "pruned"' in events
    rc, out, _ = emu.run("status")
    assert out.startswith("[alive] ") and "Pruned" not in out


def test_reassign_orphans_the_old_vm_and_changes_the_endpoint(emu: Emu) -> None:
    old = emu.new("job1", "--gpu", "t4")
    rc, out, _ = emu.admin(
        "reassign", "--config", str(emu.home / ".config/colab-cli/sessions.json"), "job1"
    )
    new = out.strip()
    assert rc == 0 and new != old and emu.endpoint("job1") == new
    rc, out, _ = emu.run("sessions")
    assert f"[?] {old} | Hardware: T4" in out and f"[job1] {new} | Hardware: T4" in out


def test_usage_counts_assignments_and_goes_down_over_time(emu: Emu) -> None:
    assert emu.run("usage") == (
        0,
        "Current balance: 100.00 compute units\nUsage rate: 0.00/hr\nActive assignments: 0\n",
        "",
    )
    fast = {"COLAB_EMU_TIME_SCALE": "3600"}  # one real second bills one hour
    assert emu.run("new", "-s", "g", "--gpu", "t4", env=fast)[0] == 0
    assert emu.run("new", "-s", "c", env=fast)[0] == 0

    def balance() -> float:
        rc, out, _ = emu.run("usage", env=fast)
        assert rc == 0
        lines = out.splitlines()
        assert lines[1:] == ["Usage rate: 1.83/hr", "Active assignments: 2"]
        return float(lines[0].split()[2])

    first = balance()
    time.sleep(0.5)
    second = balance()
    assert first < 100.0
    assert 0.5 < first - second < 3.0
    assert emu.admin("set-balance", "42.5")[0] == 0
    assert emu.run("usage")[1].startswith("Current balance: 42.5")
