"""A folder every user can reach, for the scripts that run on the VM: run as root (as on Colab),
the wrapper runs the job as an unprivileged user, who must reach the job's folder as on a VM;
pytest's own folders are their user's alone."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def reachable_folder(prefix: str) -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        folder.chmod(0o755)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
