"""`colab-emu`: the emulator's admin tool (not part of the real CLI).

Faults, the server side (orphans, re-assignment, balance, latest version) and process hygiene
(`kill-all` for test teardown). The emulator home is `--home`, else `$COLAB_EMU_HOME`, else
`~/.colab-emulator`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime
from pathlib import Path

from .backend import Backend
from .cmd_session import hardware_request
from .context import build_context, emu_home_from, time_scale_from
from .faults import FaultError, clear_faults, list_faults, set_fault
from .image import reach
from .jsonfile import read_json
from .nvidia_smi import cuda_version_problem
from .session_ops import describe
from .store import SessionStore, new_record, record_history
from .vm import drop_connections, find_processes, kill_marked, mark_for, set_gpu, vm_paths


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="colab-emu", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--home", help="emulator home (default: $COLAB_EMU_HOME or ~/.colab-emulator)"
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    faults = sub.add_parser("faults", help="show or change injected faults").add_subparsers(
        dest="action", required=True
    )
    fset = faults.add_parser("set", help="install a fault: faults set COMMAND '{\"http\": 500}'")
    fset.add_argument("command")
    fset.add_argument("fields", help="JSON object of fault fields")
    faults.add_parser("clear", help="remove faults").add_argument("command", nargs="?")
    faults.add_parser("list", help="print the faults as JSON")
    sub.add_parser("vms", help="list assignments and their processes")
    orphan = sub.add_parser("orphan", help="create an assignment with no local record")
    orphan.add_argument("--gpu")
    orphan.add_argument("--tpu")
    orphan.add_argument("--high-mem", action="store_true")
    reassign = sub.add_parser("reassign", help="what a second `colab new -s NAME` does")
    reassign.add_argument(
        "--config", help="sessions.json (default ~/.config/colab-cli/sessions.json)"
    )
    reassign.add_argument("name")
    sub.add_parser("unassign", help="the server drops a VM (no local change)").add_argument(
        "endpoint"
    )
    sub.add_parser("kill-kernel", help="kill a VM's processes, keep its assignment").add_argument(
        "endpoint"
    )
    sub.add_parser(
        "drop-connections",
        help="every exec client attached to the VM loses its websocket (the code goes on)",
    ).add_argument("endpoint")
    gpu = sub.add_parser("set-gpu", help="what a GPU VM's nvidia-smi reports from now on")
    gpu.add_argument("endpoint")
    gpu.add_argument("--util", type=int, help="utilization.gpu, percent")
    gpu.add_argument("--memory-used", type=int, help="memory.used, MiB")
    cuda = sub.add_parser(
        "set-cuda",
        help="the driver's CUDA version nvidia-smi reports: GPU VMs assigned from now on, or "
        "ENDPOINT's",
    )
    cuda.add_argument("version", help="MAJOR.MINOR, e.g. 12.2")
    cuda.add_argument("endpoint", nargs="?")
    sub.add_parser(
        "billing", help="compute units per assignment: ended ones, then open ones"
    ).add_argument("--json", action="store_true", help="one JSON array")
    sub.add_parser("set-balance", help="set the compute-unit balance").add_argument(
        "balance", type=float
    )
    sub.add_parser(
        "set-account", help="the account `colab whoami` prints (one emulator home, one account)"
    ).add_argument("email")
    sub.add_parser("set-latest-version", help="what PyPI reports ('' clears)").add_argument(
        "version"
    )
    sub.add_parser(
        "kill-all", help="unassign every VM and kill every emulator process of this home"
    )
    sub.add_parser(
        "reach",
        help="where this home's VMs go so that the job's user reaches them; exit 1 and one line "
        "when nowhere can",
    )
    return parser


def _vms(backend: Backend, home: Path) -> None:
    for assignment in backend.list_assignments():
        print(
            describe("vm", assignment).removeprefix("[vm] ")
            + f" | Assigned: {assignment['assigned_at']}"
        )
        for pid, _, cmdline in find_processes(mark_for(home, assignment["endpoint"])):
            print(f"  {pid} {cmdline}")


def _reassign(backend: Backend, config: str | None, name: str) -> str:
    ctx = build_context(os.environ, config=config)
    store = SessionStore(ctx.config_path)
    old = store.get(name)
    if old is None:
        raise SystemExit(f"colab-emu: no session {name!r} in {ctx.config_path}")
    assignment = backend.assign(
        old["variant"], old["accelerator"], old["machine_shape"], os.environ
    )
    store.add(new_record(name, assignment, old["accelerator"]))
    record_history(ctx, name, "session_created", endpoint=assignment["endpoint"])
    return str(assignment["endpoint"])


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "(open)"
    return datetime.fromtimestamp(epoch).isoformat(sep=" ", timespec="seconds")


def _billing(backend: Backend, *, as_json: bool) -> None:
    closed, still_open = backend.billing()
    records = closed + still_open
    if as_json:
        print(json.dumps(records, indent=2))
        return
    print(f"{'ENDPOINT':<16} {'ACCEL':<5} {'ASSIGNED':<19} {'UNASSIGNED':<19} {'SECONDS':>9} UNITS")
    for r in records:
        print(
            f"{r['endpoint']:<16} {r['accelerator']:<5} {_when(r['assigned_at']):<19} "
            f"{_when(r['unassigned_at']):<19} {r['seconds']:>9.1f} {r['units']:.4f}"
        )
    total = sum(float(r["units"]) for r in records)
    print(f"Total: {len(records)} assignment(s), {len(still_open)} open, {total:.4f} units")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    home = Path(os.path.abspath(args.home)) if args.home else emu_home_from(os.environ)
    backend = Backend(home, time_scale_from(os.environ))
    if args.cmd == "faults":
        if args.action == "set":
            try:
                fields = json.loads(args.fields)
                if not isinstance(fields, dict):
                    raise FaultError("fields must be a JSON object")
                print(json.dumps(set_fault(home, args.command, **fields)))
            except (ValueError, FaultError) as exc:
                print(f"colab-emu: {exc}", file=sys.stderr)
                return 2
        elif args.action == "clear":
            clear_faults(home, args.command)
        else:
            print(json.dumps(list_faults(home), indent=2))
    elif args.cmd == "vms":
        _vms(backend, home)
    elif args.cmd == "orphan":
        variant, accelerator = hardware_request(args.gpu, args.tpu)
        shape = (
            "HIGH_RAM"
            if args.high_mem and accelerator not in ("L4", "V5E1", "V6E1")
            else "STANDARD"
        )
        print(backend.assign(variant, accelerator, shape, os.environ)["endpoint"])
    elif args.cmd == "reassign":
        print(_reassign(backend, args.config, args.name))
    elif args.cmd == "unassign":
        if not backend.unassign(args.endpoint):
            print(f"colab-emu: {args.endpoint} was not assigned", file=sys.stderr)
            return 1
    elif args.cmd == "kill-kernel":
        server = read_json(vm_paths(home, args.endpoint).state, {}).get("pid")
        kill_marked(mark_for(home, args.endpoint), exclude_pid=server)
    elif args.cmd == "drop-connections":
        if backend.get(args.endpoint) is None:
            print(f"colab-emu: {args.endpoint} is not assigned", file=sys.stderr)
            return 1
        drop_connections(home, args.endpoint)
    elif args.cmd == "set-gpu":
        values = {"utilization_gpu": args.util, "memory_used_mib": args.memory_used}
        try:
            set_gpu(home, args.endpoint, **{k: v for k, v in values.items() if v is not None})
        except FileNotFoundError as exc:
            print(f"colab-emu: {exc}", file=sys.stderr)
            return 1
    elif args.cmd == "set-cuda":
        if problem := cuda_version_problem(args.version):
            print(f"colab-emu: {problem}", file=sys.stderr)
            return 2
        if args.endpoint is None:
            backend.set_cuda_version(args.version)
            return 0
        try:
            set_gpu(home, args.endpoint, cuda_version=args.version)
        except FileNotFoundError as exc:
            print(f"colab-emu: {exc}", file=sys.stderr)
            return 1
    elif args.cmd == "billing":
        _billing(backend, as_json=args.json)
    elif args.cmd == "set-balance":
        backend.set_balance(args.balance)
    elif args.cmd == "set-account":
        if "@" not in args.email or args.email != args.email.strip():
            print(f"colab-emu: {args.email!r} is not an email address", file=sys.stderr)
            return 2
        backend.set_account(args.email)
    elif args.cmd == "set-latest-version":
        backend.set_latest_version(args.version)
    elif args.cmd == "reach":
        where = reach(home)
        if where.problem is not None:
            print(f"colab-emu: {where.problem}", file=sys.stderr)
            return 1
        print(where.shared or home / "vms")
    elif args.cmd == "kill-all":
        for assignment in backend.list_assignments():
            backend.unassign(assignment["endpoint"])
        kill_marked(f"{home}::", prefix=True)
    return 0
