"""The cells colabq runs on the VM, filled from their templates in `worker/vm/`. Light on
purpose: the attach client (`attach.py`) builds its cell here without the job contract."""

from __future__ import annotations

import json
from pathlib import Path

VM_DIR = Path(__file__).parents[1] / "vm"


def fill(template: str, values: dict[str, object]) -> str:
    """`template` (a file of `worker/vm/`) with each `__KEY__` replaced by its value as JSON."""
    text = (VM_DIR / template).read_text()
    for key, value in values.items():
        text = text.replace(f"__{key}__", json.dumps(value))
    return text


def attach_source(job_id: str, nonce: str, offset: int) -> str:
    """The attach cell: follow the console from byte `offset` to the wrapper's end."""
    return fill("attach.py.tmpl", {"JOB": job_id, "NONCE": nonce, "OFFSET": int(offset)})
