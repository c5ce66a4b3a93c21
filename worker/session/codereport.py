"""The job's code and environment in its final report, from what the VM's code stage said.

The wrapper's code stage (worker/vm/colabq_code.py) ends with two sentinels, forwarded into the
job's watch record like every other: `exec_code` (the repository at its commit, or why not) and
`exec_environment` (`uv sync --frozen`, the Python, the driver's CUDA and the known breakages
with their repairs, or why the sync failed), each one JSON object. Pure: the runner's finishing
step calls these with the spec and the watch record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from worker.spec import JobSpec


def _vm(watch: Mapping[str, str], field: str) -> dict[str, Any] | None:
    """One of the stage's JSON sentinels; None if it never came (or is not an object)."""
    try:
        value = json.loads(watch.get(field) or "null")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def not_ready(watch: Mapping[str, str]) -> str | None:
    """Why the job never ran because its code or environment was not ready on the VM (the
    job's own failure: one line), or None."""
    code = _vm(watch, "exec_code")
    if code is not None and not code.get("ok"):
        return f"the job's code is not on the VM: {code.get('reason')}; the job did not run"
    env = _vm(watch, "exec_environment")
    if env is not None and not env.get("ok"):
        return f"the job's environment is not ready: {env.get('reason')}; the job did not run"
    return None


def code_report(spec: JobSpec, watch: Mapping[str, str]) -> dict[str, Any] | None:
    """What was shipped and what the VM has: None for a job without code."""
    code = spec.code
    if code is None:
        return None
    vm = _vm(watch, "exec_code")
    return {
        "mode": code.mode,
        "commit": code.commit,
        "source": code.remote if code.mode == "git" else code.snapshot,
        "subdir": code.subdir,
        # True: the VM checked out exactly the commit; False: it could not; None: not reached.
        "on_vm": None if vm is None else bool(vm.get("ok")),
        "fetch_s": vm.get("fetch_s") if vm else None,
        "reason": vm.get("reason") if vm else None,
    }


def environment_report(spec: JobSpec, watch: Mapping[str, str]) -> dict[str, Any] | None:
    """The uv environment on the VM and the known breakages found there (name, what was
    found, the repair, applied or not): None for a job that is not a uv project."""
    code = spec.code
    if code is None or not code.uv:
        return None
    vm = _vm(watch, "exec_environment") or {}
    breakages = [
        {
            "name": b.get("name"),
            "found": b.get("found"),
            "repair": b.get("repair"),
            "applied": bool(b.get("applied")),
            **({"error": b["error"]} if b.get("error") else {}),
        }
        for b in vm.get("breakages") or []
        if isinstance(b, dict)
    ]
    return {
        "python_pin": code.python,
        "repairs_opted_in": list(code.repairs),
        "synced": vm.get("ok") if vm else None,
        "reason": vm.get("reason"),
        "uv": vm.get("uv"),
        "sync_s": vm.get("sync_s"),
        "python": vm.get("python"),
        "driver_cuda": vm.get("driver_cuda"),
        "torch": vm.get("torch"),
        "torch_cuda": vm.get("torch_cuda"),
        "breakages": breakages,
    }
