"""The tasks register themselves with the worker's app: `worker.celery_app` names the modules a
worker imports when it starts (`WORKER_MODULES`, Celery's `include`) and imports none of them,
so the app's module, the tasks and the janitor's wiring form no cycle (test_import_graph).

Each case runs in a fresh interpreter: which modules are loaded is the point.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# What a worker does when it starts (`WorkController.__init__` -> `loader.init_worker()`), then
# what each task looks like to the app.
PROBE = """
import json, sys
from worker.celery_app import build_app
from worker.settings import Settings
app = build_app(Settings())
before = {"tasks": "worker.tasks" in sys.modules, "lifecycle": "worker.lifecycle" in sys.modules}
if sys.argv[1] == "worker":
    app.loader.import_default_modules()
names = sorted(n for n in app.tasks if not n.startswith("celery."))
throws = {n: [t.__name__ for t in app.tasks[n].throws] for n in names}
print(json.dumps({"before": before, "names": names, "throws": throws,
                  "loaded": {"tasks": "worker.tasks" in sys.modules,
                             "lifecycle": "worker.lifecycle" in sys.modules}}))
"""


def probe(mode: str, tmp_path: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode], cwd=tmp_path, capture_output=True, text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)},
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_a_starting_worker_imports_the_tasks_and_they_register_themselves(
    tmp_path: Path,
) -> None:
    got = probe("worker", tmp_path)
    assert got["before"] == {"tasks": False, "lifecycle": False}  # building the app loads none
    assert got["loaded"] == {"tasks": True, "lifecycle": True}
    assert got["names"] == ["colabq.adopt", "colabq.janitor", "colabq.run_job"]
    # A job that did not succeed fails its task in one line (no traceback): Celery's `throws`.
    assert got["throws"] == {
        "colabq.adopt": ["JobDidNotSucceed"], "colabq.janitor": [],
        "colabq.run_job": ["JobDidNotSucceed"],
    }  # fmt: skip


def test_an_app_that_only_sends_loads_neither_tasks_nor_lifecycle(tmp_path: Path) -> None:
    # The other side: a producer builds the app to send by name, and registers nothing.
    got = probe("producer", tmp_path)
    assert got["loaded"] == {"tasks": False, "lifecycle": False}
    assert got["names"] == []
