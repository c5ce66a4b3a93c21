"""Flower settings for colabq (`celery -A worker.celery_app flower --conf=ops/flowerconfig.py`).

Flower never runs open: HTTP basic auth from a file (`COLABQ_FLOWER_AUTH_FILE`, mode 0600, one
`user:password` per line; never on a command line), or OAuth through Flower's own
`FLOWER_AUTH_PROVIDER`/`FLOWER_OAUTH2_*` variables. Its state (tasks seen, their phases and
ends) persists across restarts in `COLABQ_FLOWER_DB`. The task list shows each job's run name,
GPU and wall cap (the task's `argsrepr`), never its spec, and for a job that did not succeed its
state, exit code and reason (the task's exception).
"""

import os
import stat
import sys
from pathlib import Path


def _fail(message: str) -> None:
    print(f"colabq flower: not starting: {message}", file=sys.stderr, flush=True)
    os._exit(2)


def _basic_auth() -> list[str]:
    path = os.environ.get("COLABQ_FLOWER_AUTH_FILE", "")
    if not path:
        if os.environ.get("FLOWER_AUTH_PROVIDER"):
            return []  # OAuth, configured through Flower's own variables
        _fail(
            "set COLABQ_FLOWER_AUTH_FILE to a 0600 file of `user:password` lines (or configure "
            "Flower's OAuth); Flower shows every job and is never served without a login"
        )
    p = Path(path)
    try:
        mode = stat.S_IMODE(p.stat().st_mode)
        lines = [ln.strip() for ln in p.read_text().splitlines() if ln.strip()]
    except OSError as exc:
        _fail(f"cannot read COLABQ_FLOWER_AUTH_FILE {path}: {exc.strerror}")
    if mode & 0o077:
        _fail(f"COLABQ_FLOWER_AUTH_FILE {path} has mode {mode:04o}; run `chmod 600 {path}`")
    if not lines or any(":" not in ln for ln in lines):
        _fail(f"COLABQ_FLOWER_AUTH_FILE {path} must hold `user:password` lines")
    return lines


basic_auth = _basic_auth()
persistent = True
db = os.environ.get(
    "COLABQ_FLOWER_DB",
    str(
        Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state"))
        / "colabq"
        / "flower.db"
    ),
)
Path(db).parent.mkdir(parents=True, exist_ok=True)
state_save_interval = 30_000  # ms: a crash loses at most this much of Flower's view
max_tasks = 10000
natural_time = False
# Flower's default list shows every job as `colabq.run_job` and no reason: a person could tell
# neither which job a row is nor why it failed (tests/integration/test_flower_browser.py).
tasks_columns = "name,uuid,state,args,exception,received,runtime,worker"
purge_offline_workers = 3600
