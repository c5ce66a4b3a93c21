"""colabq's environment check: runs on the VM inside the project's environment
(`uv run --no-sync python colabq_envcheck.py`) after `uv sync --frozen`, before the job.

It looks for the seed's known breakages of a uv environment on Colab's image and names each with
its documented repair:

- `torch-cuda`: torch is built for a newer CUDA (`torch.version.cuda`, read from torch's
  `version.py` without importing torch) than the driver runs (`CUDA Version:` in `nvidia-smi`'s
  header). Repair: torch's same version built for the driver's CUDA, from PyTorch's index.
- `nccl`: the installed `nvidia-nccl-cu*` is not the version torch's metadata requires (what
  TensorFlow's wheels do to it; in a uv project, an override that lets both resolve). Repair:
  the version torch requires, installed without the project's uv settings (their override).
- `pytest`: `pytest` on PATH under `uv run` resolves outside the project's .venv although the
  project locks pytest (the system's is picked up). Repair: the locked pytest into the .venv.

A repair runs only when named (`--repair NAME`, the job's opt-in), only in this environment, with
`uv pip install` (uv.lock and pyproject.toml are never touched); after it the breakage is looked
for again and the report says whether it is gone. Human lines go to stderr (the job's log); the
report is one JSON object on stdout. Stays importable by Python 3.8 (a project may pin it).

Usage: colabq_envcheck.py --uv PATH [--repair NAME]... [--smi PATH]
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

TORCH_INDEX = "https://download.pytorch.org/whl/"
# CUDA versions PyTorch publishes builds for: a repair takes the newest the driver runs.
TORCH_CUDAS = ("11.8", "12.1", "12.4", "12.6", "12.8", "12.9", "13.0")
ORDER = ("torch-cuda", "nccl", "pytest")


def say(text: str) -> None:
    print(f"colabq: environment: {text}", file=sys.stderr, flush=True)


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:2])


def driver_cuda(smi: str) -> str | None:
    """The highest CUDA the driver runs, from `nvidia-smi`'s header; None without a GPU."""
    try:
        out = subprocess.run([smi], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"CUDA Version:\s*(\d+\.\d+)", out)
    return found.group(1) if found else None


def dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def torch_cuda() -> str | None:
    """`torch.version.cuda` as torch's own version.py states it (None: a CPU build, or no
    torch); importing torch would take seconds and touch the GPU."""
    try:
        dist = metadata.distribution("torch")
    except metadata.PackageNotFoundError:
        return None
    try:
        text = Path(str(dist.locate_file("torch/version.py"))).read_text()
    except OSError:
        return None
    found = re.search(r"^cuda\s*(?::[^=\n]*)?=\s*['\"]([\d.]+)['\"]", text, re.M)
    return found.group(1) if found else None


def torch_nccl() -> tuple[str, str] | None:
    """(distribution, version) of the NCCL torch's metadata pins, if it pins one."""
    try:
        requires = metadata.requires("torch") or []
    except metadata.PackageNotFoundError:
        return None  # no torch in the project: nothing pins an NCCL
    for req in requires:
        found = re.match(r"\s*(nvidia-nccl-cu\d+)\s*==\s*([\w.]+)", req)
        if found:
            return found.group(1), found.group(2)
    return None


def project_root(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        if (folder / "uv.lock").is_file():
            return folder
    return None


def locked_version(lock: Path, name: str) -> str | None:
    """`name`'s version in uv.lock (a [[package]] entry), without a TOML parser (3.8)."""
    pattern = r'\[\[package\]\]\s*\nname = "' + re.escape(name) + r'"\s*\nversion = "([^"]+)"'
    found = re.search(pattern, lock.read_text())
    return found.group(1) if found else None


class Found:
    """One breakage: what was found, and the `uv pip install` arguments that repair it (None:
    no repair known)."""

    def __init__(self, name: str, found: str, spec: list[str] | None) -> None:
        self.name, self.found, self.spec = name, found, spec

    @property
    def repair(self) -> str | None:
        return "uv pip install " + shlex.join(self.spec) if self.spec else None


def find_torch_cuda(driver: str | None) -> Found | None:
    built = torch_cuda()
    if driver is None or built is None or version_tuple(built) <= version_tuple(driver):
        return None
    torch = dist_version("torch") or "?"
    found = f"torch {torch} is built for CUDA {built}; the driver runs CUDA {driver} at most"
    fits = [c for c in TORCH_CUDAS if version_tuple(c) <= version_tuple(driver)]
    if not fits:
        return Found("torch-cuda", found, None)
    tag = "cu" + fits[-1].replace(".", "")
    base = torch.split("+")[0]
    return Found("torch-cuda", found, [f"torch=={base}+{tag}", "--index-url", TORCH_INDEX + tag])


def find_nccl() -> Found | None:
    pinned = torch_nccl()
    if pinned is None:
        return None
    name, wanted = pinned
    have = dist_version(name)
    if have is None or have == wanted:
        return None
    found = (
        f"{name} {have} is installed but torch {dist_version('torch')} requires {wanted} "
        "(TensorFlow's wheels bring their own)"
    )
    # Without the project's uv settings: its override is what pinned TensorFlow's NCCL (uv's
    # environment variables, UV_INDEX_URL and the like, still apply).
    return Found("nccl", found, ["--no-config", f"{name}=={wanted}"])


def inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def find_pytest(root: Path | None) -> Found | None:
    locked = locked_version(root / "uv.lock", "pytest") if root else None
    if locked is None:
        return None
    where = shutil.which("pytest")
    if where is None or inside(Path(where), Path(sys.prefix)):
        return None
    found = f"pytest on PATH is {where}, outside the project's .venv (the project locks {locked})"
    return Found("pytest", found, [f"pytest=={locked}"])


def find(name: str, driver: str | None, root: Path | None) -> Found | None:
    if name == "torch-cuda":
        return find_torch_cuda(driver)
    if name == "nccl":
        return find_nccl()
    return find_pytest(root)


def repair(uv: str, b: Found) -> str | None:
    """Run the breakage's repair in this environment; None when it ran, else why not."""
    assert b.spec is not None
    say(f"repairing {b.name}: {b.repair}")
    argv = [uv, "pip", "install", "--python", sys.executable, *b.spec]
    try:
        done = subprocess.run(argv, stdout=sys.stderr, stderr=subprocess.STDOUT, timeout=1800)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None if done.returncode == 0 else f"uv pip install exited {done.returncode}"


def check(uv: str, repairs: list[str], smi: str) -> dict[str, Any]:
    driver = driver_cuda(smi)
    root = project_root(Path.cwd())
    breakages: list[dict[str, Any]] = []
    for name in ORDER:
        b = find(name, driver, root)
        if b is None:
            continue
        entry: dict[str, Any] = {"name": name, "found": b.found, "repair": b.repair}
        say(f"{name}: {b.found}; repair: {b.repair or 'none known'}")
        if name in repairs and b.spec:
            error = repair(uv, b)
            still = find(name, driver, root)
            entry["applied"] = error is None and still is None
            if not entry["applied"]:
                entry["error"] = error or f"still broken after the repair: {still and still.found}"
            say(
                f"{name}: "
                + ("repaired" if entry["applied"] else f"NOT repaired: {entry['error']}")
            )
        else:
            entry["applied"] = False
            if b.spec:
                say(f"{name}: not repaired (name {name} in the job's repairs to let colabq do it)")
        breakages.append(entry)
    return {
        "python": sys.version.split()[0],
        "venv": sys.prefix,
        "driver_cuda": driver,
        "torch": dist_version("torch"),
        "torch_cuda": torch_cuda(),
        "breakages": breakages,
    }


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="colabq_envcheck.py")
    p.add_argument("--uv", required=True)
    p.add_argument("--repair", action="append", default=[], choices=ORDER)
    p.add_argument("--smi", default="nvidia-smi")
    a = p.parse_args(argv)
    print(json.dumps(check(a.uv, a.repair, a.smi)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
