"""A tiny uv project in a git repository whose `uv.lock` resolves offline, for tests, the bench
and the demo: what a researcher's training repository looks like to colabq, without PyPI.

The project's dependencies are hand-written wheels in its own `wheels/` folder (`[tool.uv]
find-links = ["wheels"]`, `package = false`), so `uv lock`, `uv sync --frozen` and the repairs'
`uv pip install` all work with `UV_OFFLINE=1`. The fake packages let a test simulate each of the
seed's known breakages of a uv environment on Colab's image:

- `torch` exposes `torch.version.cuda` (and `torch/version.py`, which colabq's checker reads) and
  requires `nvidia-nccl-cu12==2.21.5`; builds for several CUDA versions sit in `wheels/`, so a
  torch built for a newer CUDA than the emulated driver (`torch_cuda="12.8"` against the
  emulator's default 12.4) can be repaired offline with the driver's build;
- `tensorflow=True` adds a fake `tensorflow` pinning `nvidia-nccl-cu12==2.23.4`, co-resolved
  with torch by an override (how one project holds both): the lock's NCCL is not torch's;
- `pytest_group="test"` declares the `pytest` stub in a group `uv sync` leaves out, so `pytest`
  under `uv run` resolves to the system's (the stub prints `project pytest <path>`).

`build_uv_project` commits it all and pushes to a bare clone beside it (`<name>.git`, the
working tree's `origin`), what a VM fetches from as a file:// remote. `snapshot_archive` builds
what a `code: snapshot` job unpacks: `git archive` of a commit plus `.colabq-commit`, gzipped.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

TORCH_VERSION = "2.5.0"
TORCH_BUILDS = ("12.1", "12.4", "12.8")  # CUDA versions of the torch wheels in wheels/
NCCL_TORCH = "2.21.5"  # what torch's metadata requires
NCCL_TENSORFLOW = "2.23.4"  # what tensorflow's pins
PYTEST_VERSION = "8.3.4"
COMMIT_FILE = ".colabq-commit"
# The job's own view of where it runs: its commit, its interpreter, its torch.
TRAIN_PY = """\
import pathlib
import sys

import torch

print("python:", sys.executable)
print("torch:", torch.__version__, "cuda:", torch.version.cuda)
out = pathlib.Path("out")
out.mkdir(exist_ok=True)
(out / "result.txt").write_text("trained\\n")
print("wrote out/result.txt")
"""
TORCH_INIT = "from . import cuda, version\n\n__version__ = version.__version__\n"
_GIT_ID = ["-c", "user.name=colabq test", "-c", "user.email=test@colabq.invalid"]


@dataclass(frozen=True)
class UvProject:
    root: Path  # the working tree, committed
    commit: str  # its HEAD
    remote: Path  # the bare clone holding the commit (`origin`)
    python: str  # the pin in .python-version

    @property
    def remote_url(self) -> str:
        return self.remote.as_uri()


def find_uv() -> str:
    """The uv beside this interpreter (the venv's, as pinned), else the one on PATH."""
    here = Path(sys.executable).parent / "uv"
    found = str(here) if here.exists() else shutil.which("uv")
    if found is None:
        raise FileNotFoundError("uv is not installed beside this python nor on PATH")
    return found


def cuda_tag(cuda: str) -> str:
    """`12.4` -> `cu124`: the local version PyTorch's builds carry."""
    major, minor = cuda.split(".")[:2]
    return f"cu{major}{minor}"


def write_wheel(
    dest: Path,
    name: str,
    version: str,
    files: Mapping[str, str],
    requires: Iterable[str] = (),
    entry_points: str = "",
) -> Path:
    """A minimal pure-Python wheel (METADATA, WHEEL, RECORD and `files`), as pip and uv take it."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    members = dict(files)
    members[f"{info}/METADATA"] = meta
    members[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: colabq-uvproject\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n"
    )
    if entry_points:
        members[f"{info}/entry_points.txt"] = entry_points
    record = []
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for member, text in members.items():
            data = text.encode()
            # Fixed timestamps: the same wheel twice is the same file.
            whl.writestr(zipfile.ZipInfo(member, (2026, 1, 1, 0, 0, 0)), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{member},sha256={digest.decode()},{len(data)}")
        record.append(f"{info}/RECORD,,")
        whl.writestr(zipfile.ZipInfo(f"{info}/RECORD", (2026, 1, 1, 0, 0, 0)), "\n".join(record))
    return path


def write_wheels(dest: Path, torch_builds: Iterable[str] = TORCH_BUILDS) -> None:
    """Every fake package colabq's tests need, into `dest`."""
    for cuda in torch_builds:
        version = f"{TORCH_VERSION}+{cuda_tag(cuda)}"
        write_wheel(
            dest, "torch", version,
            {
                "torch/__init__.py": TORCH_INIT,
                "torch/version.py": f"__version__ = '{version}'\ncuda = '{cuda}'\n",
                "torch/cuda.py": "def is_available():\n    return False\n",
            },
            requires=[f"nvidia-nccl-cu12=={NCCL_TORCH}"],
        )  # fmt: skip
    for nccl in (NCCL_TORCH, NCCL_TENSORFLOW):
        write_wheel(dest, "nvidia-nccl-cu12", nccl, {"nvidia/nccl/__init__.py": f"V = '{nccl}'\n"})
    write_wheel(
        dest, "tensorflow", "2.18.0", {"tensorflow/__init__.py": "__version__ = '2.18.0'\n"},
        requires=[f"nvidia-nccl-cu12=={NCCL_TENSORFLOW}"],
    )  # fmt: skip
    write_wheel(
        dest, "pytest", PYTEST_VERSION,
        {"pytest/__init__.py": "def console_main():\n    print('project pytest', __file__)\n"
                               "    return 0\n"},
        entry_points="[console_scripts]\npytest = pytest:console_main\n",
    )  # fmt: skip


def pyproject(*, python: str, torch_cuda: str, tensorflow: bool, pytest_group: str | None) -> str:
    deps = [f'"torch=={TORCH_VERSION}+{cuda_tag(torch_cuda)}"']
    if tensorflow:
        deps.append('"tensorflow==2.18.0"')
    text = (
        f'[project]\nname = "colabq-uv-demo"\nversion = "0.1.0"\n'
        f'requires-python = ">={python}"\ndependencies = [{", ".join(deps)}]\n'
    )
    if pytest_group:
        text += f'\n[dependency-groups]\n{pytest_group} = ["pytest=={PYTEST_VERSION}"]\n'
    text += '\n[tool.uv]\npackage = false\nfind-links = ["wheels"]\n'
    if tensorflow:
        text += f'override-dependencies = ["nvidia-nccl-cu12=={NCCL_TENSORFLOW}"]\n'
    return text


def offline_env() -> dict[str, str]:
    """uv never reaches the network, nor downloads a Python."""
    return {**os.environ, "UV_OFFLINE": "1", "UV_PYTHON_DOWNLOADS": "never", "UV_NO_CACHE": "1"}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *_GIT_ID, *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.strip()


def build_uv_project(
    root: Path,
    *,
    torch_cuda: str = "12.4",
    tensorflow: bool = False,
    pytest_group: str | None = "dev",
    python: str | None = None,
    files: Mapping[str, str] | None = None,
) -> UvProject:
    """A committed uv project at `root` (created), locked offline, pushed to `<root>.git`.
    `files` adds or replaces files (path -> text) before the commit."""
    pin = python or f"{sys.version_info.major}.{sys.version_info.minor}"
    root.mkdir(parents=True)
    write_wheels(root / "wheels", sorted({*TORCH_BUILDS, torch_cuda}))
    (root / "pyproject.toml").write_text(
        pyproject(python=pin, torch_cuda=torch_cuda, tensorflow=tensorflow,
                  pytest_group=pytest_group)
    )  # fmt: skip
    (root / ".python-version").write_text(pin + "\n")
    (root / "train.py").write_text(TRAIN_PY)
    (root / ".gitignore").write_text(".venv/\nout/\n")
    for rel, text in (files or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    subprocess.run(
        [find_uv(), "lock", "--quiet"], cwd=root, env=offline_env(), check=True, timeout=120,
        capture_output=True,
    )  # fmt: skip
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a uv project")
    remote = root.with_name(root.name + ".git")
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(root), str(remote)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    git(root, "remote", "add", "origin", remote.as_uri())
    git(root, "fetch", "-q", "origin")
    git(root, "branch", "-q", "--set-upstream-to", "origin/main")
    return UvProject(root, git(root, "rev-parse", "HEAD"), remote, pin)


def commit_all(project: UvProject, message: str) -> UvProject:
    """Commit the working tree's changes (not pushed): a commit the remote does not have."""
    git(project.root, "add", "-A")
    git(project.root, "commit", "-q", "-m", message)
    return UvProject(project.root, git(project.root, "rev-parse", "HEAD"), project.remote,
                     project.python)  # fmt: skip


def snapshot_archive(repo: Path, commit: str, dest: Path) -> Path:
    """`git archive` of `commit` plus `.colabq-commit` naming it, as one .tar.gz at `dest`."""
    tar_bytes = subprocess.run(
        ["git", "archive", "--format=tar", commit], cwd=repo, capture_output=True, check=True,
        timeout=120,
    ).stdout  # fmt: skip
    buf = io.BytesIO(tar_bytes)
    with tarfile.open(fileobj=buf, mode="a") as tar:
        data = (commit + "\n").encode()
        info = tarfile.TarInfo(COMMIT_FILE)
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(gzip.compress(buf.getvalue(), mtime=0))
    return dest
