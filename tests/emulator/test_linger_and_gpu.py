"""Conformance of two things a fleet meets on real Colab: the exec client that outlives its cell
(`linger_s`), and a GPU request served with another GPU (`serve_gpu`), seen through the VM's own
`nvidia-smi`, the server's listing (`colab sessions`) and the local record (`colab status`)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from colab_emulator.faults import FaultError, set_fault
from colab_emulator.nvidia_smi import GPU_MODELS

from .conftest import Emu, wait_for

REAL_NAMES = {
    "T4": "Tesla T4",
    "L4": "NVIDIA L4",
    "A100": "NVIDIA A100-SXM4-40GB",
    "H100": "NVIDIA H100 80GB HBM3",
    "G4": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
}
# A cell that runs the VM's nvidia-smi the way a job would (from the kernel's PATH).
SMI_CELL = """
import shutil, subprocess, sys
if shutil.which("nvidia-smi") is None:
    print("NO-NVIDIA-SMI")
else:
    for args in {args!r}:
        r = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True)
        print(f"RC={{r.returncode}}")
        sys.stdout.write(r.stdout)
"""


def smi(emu: Emu, name: str, *args: list[str]) -> str:
    cell = emu.write("smi.py", SMI_CELL.format(args=list(args)))
    rc, out, err = emu.run("exec", "-s", name, "-f", str(cell))
    assert rc == 0, (out, err)
    return out


@pytest.mark.parametrize(
    ("command", "fields"),
    [
        ("exec", {"linger_s": -1}),
        ("exec", {"linger_s": True}),
        ("new", {"serve_gpu": "V100"}),
        ("new", {"serve_gpu": 4}),
        ("new", {"linger_s": 3}),
        ("exec", {"serve_gpu": "L4"}),
    ],
)
def test_bad_fields_are_refused(emu: Emu, command: str, fields: dict[str, Any]) -> None:
    with pytest.raises(FaultError):
        set_fault(emu.emu_home, command, **fields)


def test_serve_gpu_is_stored_upper_case(emu: Emu) -> None:
    assert set_fault(emu.emu_home, "new", serve_gpu="l4") == {"command": "new", "serve_gpu": "L4"}


def test_exec_client_lingers_after_its_output_then_exits_0(emu: Emu) -> None:
    emu.new("a")
    linger_s = 4.0
    set_fault(emu.emu_home, "exec", linger_s=linger_s, times=1)
    proc = emu.popen("exec", "-s", "a", "-f", str(emu.write("c.py", "print('cell-done')\n")))
    assert proc.stdout is not None
    assert proc.stdout.readline() == "cell-done\n"
    seen_at = time.monotonic()
    # The cell is done and its output printed, yet the client is alive; its record was
    # written back already (running cleared), as the real client's finally does first.
    assert proc.poll() is None
    wait_for(lambda: emu.sessions_json()["a"]["running"] is None)
    assert proc.poll() is None
    assert proc.wait(timeout=60) == 0
    assert time.monotonic() - seen_at >= linger_s - 0.5
    assert "lingering 4 s after its cell" in (emu.home / ".config/colab-cli/colab.log").read_text()
    # `times: 1`: the next client exits at once.
    started = time.monotonic()
    rc, out, _ = emu.run("exec", "-s", "a", "-f", str(emu.write("d.py", "print('again')\n")))
    assert (rc, out) == (0, "again\n")
    assert time.monotonic() - started < linger_s


@pytest.mark.parametrize("gpu", sorted(GPU_MODELS))
def test_gpu_vm_reports_its_real_name(emu: Emu, gpu: str) -> None:
    emu.new("g", "--gpu", gpu)
    out = smi(emu, "g", ["--query-gpu=name", "--format=csv,noheader"], [])
    lines = out.splitlines()
    assert lines[:2] == ["RC=0", REAL_NAMES[gpu]]
    table = "\n".join(lines[3:])
    assert lines[2] == "RC=0" and "NVIDIA-SMI" in table
    # The table names the GPU (a name too long for its column is cut, as the real one does).
    shown = REAL_NAMES[gpu] if len(REAL_NAMES[gpu]) <= 28 else REAL_NAMES[gpu][:25] + "..."
    assert f"|   0  {shown} " in table


def test_cpu_vm_has_no_nvidia_smi(emu: Emu) -> None:
    emu.new("c")
    assert smi(emu, "c", []).strip() == "NO-NVIDIA-SMI"
    endpoint = emu.endpoint("c")
    rc, _, err = emu.admin("set-gpu", endpoint, "--util", "5")
    assert rc == 1 and "has no GPU" in err


def test_served_gpu_differs_from_the_request(emu: Emu) -> None:
    set_fault(emu.emu_home, "new", serve_gpu="L4", times=1)
    endpoint = emu.new("a", "--gpu", "A100")
    # The VM has what the server gave.
    assert smi(emu, "a", ["--query-gpu=name", "--format=csv,noheader"]).splitlines() == [
        "RC=0",
        "NVIDIA L4",
    ]
    # The local record (and so `status`) keeps what was asked: the real `new` stores the flag's
    # accelerator, not the response's; `sessions` lists the server's assignment.
    assert emu.sessions_json()["a"]["accelerator"] == "A100"
    rc, out, _ = emu.run("status", "-s", "a")
    assert rc == 0 and f"[a] {endpoint} | Hardware: A100 |" in out
    rc, out, _ = emu.run("sessions")
    assert rc == 0 and f"[a] {endpoint} | Hardware: L4 | Shape: Standard | Variant: GPU" in out
    # Billed as what was served.
    rc, out, _ = emu.admin("billing")
    assert rc == 0 and f"{endpoint}   L4 " in out
    # `times: 1`: the next request gets what it asks for.
    emu.new("b", "--gpu", "A100")
    rc, out, _ = emu.run("sessions")
    assert f"[b] {emu.endpoint('b')} | Hardware: A100 |" in out


def test_serve_gpu_leaves_cpu_requests_alone(emu: Emu) -> None:
    set_fault(emu.emu_home, "new", serve_gpu="T4")
    emu.new("c")
    rc, out, _ = emu.run("sessions")
    assert rc == 0 and "Hardware: CPU" in out
    assert smi(emu, "c", []).strip() == "NO-NVIDIA-SMI"


def test_utilisation_and_memory_follow_set_gpu(emu: Emu) -> None:
    endpoint = emu.new("g", "--gpu", "T4")
    query = ["--query-gpu=name,utilization.gpu,memory.used,memory.total", "--format=csv"]
    assert smi(emu, "g", query).splitlines() == [
        "RC=0",
        "name, utilization.gpu [%], memory.used [MiB], memory.total [MiB]",
        "Tesla T4, 0 %, 0 MiB, 15360 MiB",
    ]
    rc, _, err = emu.admin("set-gpu", endpoint, "--util", "87", "--memory-used", "1200")
    assert rc == 0, err
    nounits = ["--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits"]
    assert smi(emu, "g", nounits).splitlines() == ["RC=0", "87, 1200"]
    bad = smi(emu, "g", ["--query-gpu=bogus", "--format=csv"]).splitlines()
    assert bad[:2] == ["RC=2", 'Field "bogus" is not a valid field to query.']


def cuda_line(table: str) -> str:
    return next(line for line in table.splitlines() if "CUDA Version:" in line)


def test_the_driver_cuda_version_is_set_per_home_and_per_vm(emu: Emu) -> None:
    """The table's header names the driver's CUDA (what colabq compares torch's build with):
    12.4 by default, the home's `set-cuda X.Y` for VMs assigned after it, `set-cuda X.Y
    ENDPOINT` for one VM; a malformed version is refused, a VM without a GPU too."""
    emu.new("a", "--gpu", "T4")
    assert cuda_line(smi(emu, "a", [])).rstrip("| ").endswith("CUDA Version: 12.4")
    rc, _, err = emu.admin("set-cuda", "12.2")
    assert rc == 0, err
    emu.new("b", "--gpu", "L4")
    assert cuda_line(smi(emu, "b", [])).rstrip("| ").endswith("CUDA Version: 12.2")
    assert cuda_line(smi(emu, "a", [])).rstrip("| ").endswith("CUDA Version: 12.4")
    rc, _, err = emu.admin("set-cuda", "13.0", emu.endpoint("a"))
    assert rc == 0, err
    assert cuda_line(smi(emu, "a", [])).rstrip("| ").endswith("CUDA Version: 13.0")
    assert len(cuda_line(smi(emu, "a", []))) == 91
    rc, _, err = emu.admin("set-cuda", "twelve")
    assert rc == 2 and "MAJOR.MINOR" in err
    emu.new("c")
    rc, _, err = emu.admin("set-cuda", "12.1", emu.endpoint("c"))
    assert rc == 1 and "has no GPU" in err


def test_every_vm_has_uv_in_its_opt_bin(emu: Emu) -> None:
    """Colab's image has uv: a CPU VM's kernel finds it first on its PATH, in /opt/bin."""
    emu.new("c")
    cell = emu.write(
        "uv.py",
        "import shutil, subprocess\nuv = shutil.which('uv')\nprint(uv.split('/root/')[-1])\n"
        "print(subprocess.run([uv, '--version'], capture_output=True, text=True).stdout)\n",
    )
    rc, out, err = emu.run("exec", "-s", "c", "-f", str(cell))
    assert rc == 0, (out, err)
    assert out.splitlines()[0] == "opt/bin/uv" and out.splitlines()[1].startswith("uv ")
