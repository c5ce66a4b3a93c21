"""Writing the CLI's own record of a session, for an owner that did not create it.

`colab stop`, `exec` and the file commands act only on a session recorded in the caller's
`--config` (spec §3); a record lives on the host that ran `colab new`. An adopter on another host
writes one for the owned name at the recorded endpoint, with no proxy token and no expiry: the
CLI's `get_session` then refreshes the token and the runtime URL from the account's assignments
list (and prunes the record if the endpoint is gone), exactly as for a record near expiry.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from worker.colab.parse import parse_local_records
from worker.errors import SessionNameInUse

SINGLE_SHAPE = ("L4",)  # accelerators with one machine shape (the CLI ignores --high-mem)


def write_adoption_record(
    config_path: Path, name: str, endpoint: str, *, accelerator: str, high_mem: bool
) -> bool:
    """Add NAME at ENDPOINT to `config_path`; False if the record is there already. Refuses to
    overwrite NAME at another endpoint (that would orphan it). Only for a config no CLI process
    is using (a job folder of this host that has no record yet)."""
    try:
        text = config_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    records = parse_local_records(text)  # a corrupt file raises: never overwrite it blindly
    existing = records.get(name)
    if existing is not None:
        if existing.endpoint != endpoint:
            raise SessionNameInUse(name, existing.endpoint)
        return False
    data = json.loads(text) if text.strip() else {}
    data[name] = {
        "name": name,
        "token": "",
        "url": "",
        "endpoint": endpoint,
        "token_expires_at": None,
        "variant": "GPU",
        "accelerator": accelerator,
        "machine_shape": "HIGH_RAM" if high_mem and accelerator not in SINGLE_SHAPE else "STANDARD",
        "kernel_id": None,
        "session_id": None,
        "last_execution": None,
        "running": None,
    }
    config_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = config_path.with_name(f".{config_path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
    os.replace(tmp, config_path)
    return True
