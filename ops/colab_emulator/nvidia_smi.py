"""The `nvidia-smi` of an emulated GPU VM: how code on the VM learns which GPU it really got.

`colab new` on a GPU assignment writes the VM's GPU to `vms/<endpoint>/gpu.json` (outside the
VM's `/`: it is the hardware, not a file the job may change) and an executable
`root/opt/bin/nvidia-smi`, a shim that runs this module on that file; the kernel puts the VM's
`/opt/bin` first on its PATH (where Colab keeps its NVIDIA tools). CPU and TPU VMs get no
nvidia-smi: `command not found`.

gpu.json is `{"accelerator", "name", "memory_total_mib", "utilization_gpu", "memory_used_mib",
"cuda_version"}`. Utilisation and memory start at 0; a test changes them with `colab-emu set-gpu
ENDPOINT --util N --memory-used MIB` (or by writing the file), and nvidia-smi reads the file on
every call. `cuda_version` is the highest CUDA the driver supports, the table's `CUDA Version:`
(what colabq's environment check compares torch's build with): the emulator home's default
(`colab-emu set-cuda X.Y`, else 12.4) when the VM was assigned, or `set-cuda X.Y ENDPOINT`.

Supported, with the real output shapes:
- `nvidia-smi`: a short table naming the GPU (a name too long for its column is cut to
  `<first 25 chars>...`, as the real table does);
- `nvidia-smi -L`: `GPU 0: <name> (UUID: GPU-...)`;
- `nvidia-smi --query-gpu=F[,F...] --format=csv[,noheader][,nounits]` with F among `FIELDS`
  (`-i 0` / `--id=0` accepted). Values are `, `-separated; units (`MiB`, `%`) follow the value
  unless `nounits`; the header line names each field with its unit in brackets.
An unknown field: `Field "x" is not a valid field to query.` on stdout, exit 2. Other options:
`Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.`, exit 2.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

# Colab's accelerator names -> (the name NVIDIA's driver reports, total memory in MiB).
GPU_MODELS: dict[str, tuple[str, int]] = {
    "T4": ("Tesla T4", 15360),
    "L4": ("NVIDIA L4", 23034),
    "A100": ("NVIDIA A100-SXM4-40GB", 40960),
    "H100": ("NVIDIA H100 80GB HBM3", 81559),
    "G4": ("NVIDIA RTX PRO 6000 Blackwell Server Edition", 97887),
}
DRIVER_VERSION = "550.54.15"
CUDA_VERSION = "12.4"
# field -> (header unit, value unit)
FIELDS: dict[str, tuple[str, str]] = {
    "index": ("", ""),
    "name": ("", ""),
    "count": ("", ""),
    "driver_version": ("", ""),
    "uuid": ("", ""),
    "memory.total": (" [MiB]", " MiB"),
    "memory.used": (" [MiB]", " MiB"),
    "memory.free": (" [MiB]", " MiB"),
    "utilization.gpu": (" [%]", " %"),
}
BAD_ARGS = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help."
NAME_WIDTH = 28


def gpu_state(accelerator: str, cuda_version: str = CUDA_VERSION) -> dict[str, Any]:
    """What `colab new` writes to gpu.json for an assignment of `accelerator`."""
    name, memory = GPU_MODELS[accelerator]
    return {
        "accelerator": accelerator,
        "name": name,
        "memory_total_mib": memory,
        "utilization_gpu": 0,
        "memory_used_mib": 0,
        "cuda_version": cuda_version,
    }


def cuda_version_problem(version: str) -> str | None:
    """Why `version` cannot be a driver's `CUDA Version:` (MAJOR.MINOR), or None."""
    if re.fullmatch(r"[1-9][0-9]?\.[0-9]", version):
        return None
    return f"CUDA version {version!r} must be MAJOR.MINOR, e.g. 12.4"


def _uuid(gpu: dict[str, Any]) -> str:
    """A stable UUID per model (this VM has one GPU)."""
    digest = hashlib.md5(str(gpu["name"]).encode(), usedforsecurity=False).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _value(gpu: dict[str, Any], field: str) -> str:
    total, used = int(gpu["memory_total_mib"]), int(gpu["memory_used_mib"])
    return {
        "index": "0",
        "name": str(gpu["name"]),
        "count": "1",
        "driver_version": DRIVER_VERSION,
        "uuid": _uuid(gpu).replace(" ", "0"),
        "memory.total": str(total),
        "memory.used": str(used),
        "memory.free": str(max(0, total - used)),
        "utilization.gpu": str(int(gpu["utilization_gpu"])),
    }[field]


def query(gpu: dict[str, Any], fields: list[str], fmt: set[str]) -> str:
    """`--query-gpu` with `--format=csv[,noheader][,nounits]`."""
    units = "nounits" not in fmt
    lines = []
    if "noheader" not in fmt:
        lines.append(", ".join(f + (FIELDS[f][0] if units else "") for f in fields))
    lines.append(", ".join(_value(gpu, f) + (FIELDS[f][1] if units else "") for f in fields))
    return "\n".join(lines) + "\n"


def _row(*cells: str, widths: tuple[int, ...] = (41, 24, 22)) -> str:
    padded = (f"{cell:<{width}}" for cell, width in zip(cells, widths, strict=True))
    return "|" + "|".join(padded) + "|"


def table(gpu: dict[str, Any]) -> str:
    """The plain `nvidia-smi` table (91 columns, as the real one)."""
    name = str(gpu["name"])
    if len(name) > NAME_WIDTH:
        name = name[:25] + "..."
    used, total = int(gpu["memory_used_mib"]), int(gpu["memory_total_mib"])
    util = f"{int(gpu['utilization_gpu'])}%"
    line = "+" + "-" * 89 + "+"
    versions = (
        f" NVIDIA-SMI {DRIVER_VERSION:<22} Driver Version: {DRIVER_VERSION:<14} "
        f"CUDA Version: {gpu.get('cuda_version') or CUDA_VERSION}"
    )
    return "\n".join(
        [
            line,
            f"|{versions:<89}|",
            "|" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+",
            _row(" GPU  Name                 Persistence-M", " Bus-Id          Disp.A",
                 " Volatile Uncorr. ECC"),
            _row(" Fan  Temp   Perf          Pwr:Usage/Cap", "           Memory-Usage",
                 " GPU-Util  Compute M."),
            "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|",
            _row(f"   0  {name:<{NAME_WIDTH}}   Off ", "   00000000:00:04.0 Off",
                 f"{'0':>21}"),
            _row(" N/A   40C    P8             12W /   70W", f"{f'{used}MiB / {total}MiB':>23}",
                 f"{util:>8}      Default "),
            "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+",
            "",
            line,
            f"|{' Processes:':<89}|",
            f"|{'  GPU   GI   CI        PID   Type   Process name':<78}GPU Memory |",
            f"|{'        ID   ID':<78}Usage      |",
            "|" + "=" * 89 + "|",
            f"|{'  No running processes found':<89}|",
            line,
        ]
    ) + "\n"  # fmt: skip


def _options(args: list[str]) -> dict[str, str] | None:
    """`--opt=value`, `--opt value` and `-i 0` into a dict; None for anything unsupported."""
    opts: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-L":
            opts["-L"] = ""
        elif arg.startswith("--") and "=" in arg:
            key, value = arg.split("=", 1)
            opts[key] = value
        elif arg in ("--query-gpu", "--format", "-i", "--id") and i + 1 < len(args):
            opts[arg] = args[i + 1]
            i += 1
        else:
            return None
        i += 1
    if set(opts) - {"-L", "--query-gpu", "--format", "-i", "--id"}:
        return None
    if opts.get("-i", opts.get("--id", "0")) != "0":
        return None
    return opts


def main(argv: list[str]) -> int:
    gpu = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    opts = _options(argv[1:])
    if opts is None:
        print(BAD_ARGS)
        return 2
    if "-L" in opts:
        print(f"GPU 0: {gpu['name']} (UUID: {_value(gpu, 'uuid')})")
        return 0
    if "--query-gpu" not in opts:
        if "--format" in opts:
            print(BAD_ARGS)
            return 2
        sys.stdout.write(table(gpu))
        return 0
    fmt = {part.strip() for part in opts.get("--format", "").split(",") if part.strip()}
    if "csv" not in fmt or fmt - {"csv", "noheader", "nounits"}:
        print(BAD_ARGS)
        return 2
    fields = [f.strip() for f in opts["--query-gpu"].split(",") if f.strip()]
    for field in fields:
        if field not in FIELDS:
            print(f'Field "{field}" is not a valid field to query.')
            print()
            return 2
    sys.stdout.write(query(gpu, fields, fmt))
    return 0
