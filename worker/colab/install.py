"""The `colab` CLI's installation: which Python runs it, and whether its `exec` path imports.

A CLI whose dependency `jupyter-kernel-client` is installed at another version than it pins can
answer `colab version` and `colab usage` and still crash every `colab exec`: `colab_cli.runtime`
imports the package at load, then, when it connects, takes `JupyterSubprotocol.DEFAULT` and the
first of `ColabKernelClient`, `KernelClient`, `JupyterKernelClient` it has (jupyter-kernel-client
0.8 has no `JupyterSubprotocol`: AttributeError on every exec). `check_exec_path` runs the CLI's
own interpreter (the one its launcher's shebang names, with the environment the driver gives the
CLI) far enough to prove that path: it imports `colab_cli.cli` (every command's module) and
`colab_cli.runtime`, then resolves those names as runtime.py does; nothing connects, nothing is
written. The CLI's own metadata gives its version and its pin, for the repair. A `colab` whose
interpreter has no `colab_cli` package (the offline emulator, a wrapper) is said so, not failed.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from worker.colab.versions import PACKAGE, SUPPORTED

# pip's launcher for a long interpreter path: `#!/bin/sh` then `'''exec' "/path/python" "$0" "$@"`.
_SH_EXEC = re.compile(r"""^'''exec' "?(?P<python>[^"\s]+)"? "\$0" "\$@"$""", re.MULTILINE)
_PROBE = r"""
import importlib, importlib.util, json, sys
from importlib import metadata
out = {"python": sys.executable, "colab_cli": importlib.util.find_spec("colab_cli") is not None}
def version(dist):
    try:
        return metadata.version(dist)
    except Exception:
        return None
if out["colab_cli"]:
    out["cli_version"] = version("google-colab-cli")
    try:
        requires = metadata.requires("google-colab-cli") or []
    except Exception:
        requires = []
    out["pins"] = [r for r in requires if r.lower().replace("_", "-").startswith("jupyter-kernel")]
    step = None
    try:
        for step in ("colab_cli.cli", "colab_cli.runtime", "jupyter_kernel_client"):
            jkc = importlib.import_module(step)
        step = "JupyterSubprotocol"
        jkc.JupyterSubprotocol.DEFAULT
        step = "a kernel client class (ColabKernelClient, KernelClient or JupyterKernelClient)"
        next(getattr(jkc, n) for n in ("ColabKernelClient", "KernelClient", "JupyterKernelClient")
             if hasattr(jkc, n))
    except BaseException as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"[:300]
        out["step"] = step
        out["module"] = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
    out["jkc_version"] = version("jupyter-kernel-client")
print(json.dumps(out))
"""


class Verdict(StrEnum):
    IMPORTS = "imports"  # the exec path imports
    BROKEN = "broken"  # it does not: every `colab exec` would crash
    NOT_GOOGLE = "not_google"  # the interpreter has no colab_cli (the emulator, a wrapper)
    UNKNOWN = "unknown"  # the interpreter could not be found or run


@dataclass(frozen=True)
class ExecPath:
    verdict: Verdict
    detail: str  # what was checked and found, one line
    repair: str = ""  # for BROKEN: the command that mends it


def interpreter(launcher: Path) -> str | None:
    """The Python the `colab` launcher runs: its shebang's, or pip's `/bin/sh` trampoline's."""
    try:
        with open(launcher, "rb") as f:
            head = f.read(2048).decode("utf-8", "replace")
    except OSError:
        return None
    first = head.splitlines()[0] if head else ""
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if not words:
        return None
    python = words[1] if Path(words[0]).name == "env" and len(words) > 1 else words[0]
    if Path(words[0]).name in ("sh", "bash") and (m := _SH_EXEC.search(head)):
        python = m["python"]
    return python if Path(python).name.startswith("python") else None  # a shell wrapper: None


def check_exec_path(launcher: Path, env: Mapping[str, str], timeout_s: float) -> ExecPath:
    python = interpreter(launcher)
    if python is None:
        return ExecPath(Verdict.UNKNOWN, f"{launcher} names no Python interpreter to check")
    try:
        run = subprocess.run(
            [python, "-c", _PROBE], env=dict(env), stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=timeout_s, check=False,
        )  # fmt: skip
        found = json.loads(run.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        return ExecPath(Verdict.UNKNOWN, f"{python} did not import colab_cli in {timeout_s:g} s")
    except (OSError, ValueError, IndexError) as exc:
        return ExecPath(Verdict.UNKNOWN, f"{python} could not be run to check: {exc}")
    if not isinstance(found, dict):
        return ExecPath(Verdict.UNKNOWN, f"{python} answered the check with {found!r}")
    return _verdict(launcher, python, found)


def _verdict(launcher: Path, python: str, found: dict[str, object]) -> ExecPath:
    if not found.get("colab_cli"):
        return ExecPath(
            Verdict.NOT_GOOGLE,
            f"{launcher} runs {python}, which has no colab_cli package (not {PACKAGE}: the "
            "offline emulator?): `exec` imports not checked",
        )
    cli = str(found.get("cli_version") or "?")
    jkc = found.get("jkc_version") or "not installed"
    listed = found.get("pins")
    pins = ", ".join(str(p) for p in listed if p) if isinstance(listed, list) else ""
    pins = pins or "no pin found"
    error = found.get("error")
    if not error:
        return ExecPath(
            Verdict.IMPORTS,
            f"{PACKAGE} {cli} under {python}: `colab exec`'s imports resolve "
            f"(jupyter-kernel-client {jkc})",
        )
    step, module = str(found.get("step") or "?"), found.get("module")
    if module and not str(module).startswith("jupyter_kernel_client"):
        what = f"its dependency {module} is missing or broken"
    elif step.startswith(("JupyterSubprotocol", "a kernel client")):
        what = f"jupyter-kernel-client {jkc} has no {step} (the CLI pins {pins})"
    else:
        what = f"importing {step} fails, with jupyter-kernel-client {jkc} (the CLI pins {pins})"
    target = cli if cli in SUPPORTED else SUPPORTED[-1]
    return ExecPath(
        Verdict.BROKEN,
        f"{PACKAGE} {cli} under {python}: every `colab exec` would crash: {what} ({error})",
        f"reinstall it with the dependencies it pins: `uv tool install --reinstall "
        f"{PACKAGE}=={target}`",
    )
