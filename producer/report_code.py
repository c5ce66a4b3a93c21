"""The final report's code and environment rows, in words: what the VM ran and what it found.

From the report's `code` and `environment` objects (worker/session/codereport.py): the commit
and where it came from, the uv environment, and one row per known breakage of a uv environment
on Colab's image, named with its repair and whether it was applied (only when the job opted in).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def code_rows(report: dict[str, Any]) -> Iterator[tuple[str, str]]:
    code, env = report.get("code"), report.get("environment")
    if isinstance(code, dict):
        where = f"{code.get('mode')} {str(code.get('commit'))[:12]} from {code.get('source')}"
        if code.get("subdir"):
            where += f", started in {code['subdir']}"
        if code.get("on_vm") is False:
            where += f": not on the VM ({code.get('reason')})"
        yield "code", where
    if not isinstance(env, dict):
        return
    if env.get("synced") is False:
        yield "environment", f"not ready: {env.get('reason')}"
    elif env.get("synced"):
        took = env.get("sync_s")
        took_s = f" in {took:.1f}s" if isinstance(took, int | float) else ""
        yield "environment", f"uv sync --frozen{took_s}, python {env.get('python') or '?'}"
    opted = set(env.get("repairs_opted_in") or ())
    for b in env.get("breakages") or ():
        name = b.get("name")
        if b.get("applied"):
            done = "repaired on the VM (uv.lock unchanged)"
        elif b.get("error"):
            done = f"repair failed: {b['error']}"
        elif name in opted:
            done = "not repaired"
        else:
            done = f"not repaired: add `repairs: [{name}]` to the job file to repair it on the VM"
        yield "breakage", f"{name}: {b.get('found')}; repair: {b.get('repair')}; {done}"
