"""The wrapper's final upload stores the VM's console byte for byte (every line up to the job's
exit status), so that a VM gone before an attach client forwarded its last lines leaves them in
the store (`worker.records.tail` forwards them from there)."""

from __future__ import annotations

from tests.vm.conftest import NONCE, Vm
from worker.records.tail import console_items
from worker.store.artifacts import console_name

JOB = 'for i in $(seq 1 300); do echo "line-$i"; done\nprintf "no newline at the end"\nexit 3\n'


def test_the_final_upload_stores_the_console_up_to_the_exit_status(vm: Vm) -> None:
    run = vm.run(JOB, to_console=True)
    assert run.rc == 3, run.console
    console = (run.work / "run" / "console.log").read_bytes()
    stored = (vm.store / "p" / "logs" / "j1" / console_name(0)).read_bytes()
    assert console.startswith(stored), "a byte-for-byte prefix of the VM's console"
    # What the copy lacks is what the wrapper prints once the upload it is part of is over.
    after = console[len(stored) :].decode().splitlines()
    assert after == [f"__COLABQ_{NONCE}_FINAL_UPLOAD__=ok", f"__COLABQ_{NONCE}_DONE__=3"]
    items = console_items(stored, 0, NONCE)
    lines = [it.payload for it in items if it.kind == "l" and it.payload.startswith("line-")]
    assert lines == [f"line-{i}" for i in range(1, 301)]
    assert [it.payload for it in items if it.kind == "l"][-1] == "no newline at the end"
    assert items[-1].kind == "s" and items[-1].payload == "EXIT=3"
    assert items[-1].end_offset == len(stored)


def test_each_segment_stores_its_own_console(vm: Vm) -> None:
    run = vm.run("echo segment-two\n", "--segment", "2", to_console=True)
    assert run.rc == 0, run.console
    logs = vm.store / "p" / "logs" / "j1"
    assert console_name(2) == "console.s2.log"
    assert b"segment-two\n" in (logs / console_name(2)).read_bytes()
    assert not (logs / console_name(0)).exists()


def test_without_a_console_file_the_final_upload_still_succeeds(vm: Vm) -> None:
    run = vm.run("echo plain\n")  # its output to a pipe: no run/console.log to copy
    assert run.rc == 0 and run.sentinels["FINAL_UPLOAD"] == "ok", run.console
    assert not (vm.store / "p" / "logs" / "j1" / console_name(0)).exists()
