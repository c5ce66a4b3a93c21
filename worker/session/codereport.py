"""The job's code, environment and inputs in its final report, from what the VM said while it
prepared the job.

The wrapper's code stage (worker/vm/colabq_code.py) ends with two sentinels, forwarded into the
job's watch record like every other: `exec_code` (the repository at its commit, or why not) and
`exec_environment` (`uv sync --frozen`, the Python, the driver's CUDA and the known breakages
with their repairs, or why the sync failed); its input downloads (worker/vm/colabq_inputs.py)
with `exec_inputs` (each input's path, bytes and seconds, or why one is not there); each one
JSON object. Pure: the runner's finishing step and the janitor call these with the spec and the
watch record.
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
    """Why the job never ran because its code, environment or inputs were not ready on the VM
    (the job's own failure: one line), or None."""
    code = _vm(watch, "exec_code")
    if code is not None and not code.get("ok"):
        return f"the job's code is not on the VM: {code.get('reason')}; the job did not run"
    env = _vm(watch, "exec_environment")
    if env is not None and not env.get("ok"):
        return f"the job's environment is not ready: {env.get('reason')}; the job did not run"
    inputs = _vm(watch, "exec_inputs")
    if inputs is not None and not inputs.get("ok"):
        why = " ".join(str(inputs.get("reason") or "an input is not there").split())[:1000]
        return f"the job's inputs are not ready: {why}; the job did not run"
    return None


def inputs_report(spec: JobSpec, watch: Mapping[str, str]) -> dict[str, Any] | None:
    """Each declared input as the VM downloaded it (its path, bytes and seconds; None: not
    fetched by colabq, or not reached), and the whole download's seconds: None for a job
    without inputs."""
    if not spec.hub_inputs:
        return None
    vm = _vm(watch, "exec_inputs") or {}
    got: dict[str, Any] = vm["inputs"] if isinstance(vm.get("inputs"), dict) else {}
    each = {}
    for name, uri in spec.hub_inputs.items():
        one = got.get(name)
        mine: dict[str, Any] = one if isinstance(one, dict) and one.get("uri") == uri else {}
        each[name] = {"uri": uri, "path": mine.get("path"), "bytes": mine.get("bytes"),
                      "s": mine.get("s")}  # fmt: skip
    return {"ready": vm.get("ok") if vm else None, "took_s": vm.get("took_s"), "inputs": each}


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
