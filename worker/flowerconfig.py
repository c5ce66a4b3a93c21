"""Flower's configuration file for colabq (Flower executes it: `colabq flower` passes it as
`--conf`; never imported). Its login is basic auth from `COLABQ_FLOWER_AUTH_FILE` or Flower's
OAuth; `worker.flowerlogin` stops a Flower without one, however it was started. Its
state (tasks seen, their phases and ends) persists across restarts in `COLABQ_FLOWER_DB`. The
task list shows each job's run name, GPU and wall cap (the task's `argsrepr`), never its spec,
and for a job that did not succeed its state, exit code and reason (the task's exception).
"""

import os
import sys
from pathlib import Path

from worker.flowerlogin import FlowerLoginError, auth_file_lines, connect_guard

connect_guard()  # also for a Flower on another Celery app than colabq's
try:
    basic_auth = auth_file_lines(os.environ)
except FlowerLoginError as exc:
    print(f"colabq flower: not starting: {exc}", file=sys.stderr, flush=True)
    raise SystemExit(2) from None
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
