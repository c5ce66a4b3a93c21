"""Flower seen as a person sees it: the Flower docs/operations/flower.md documents (`colabq flower`,
its login from a 0600 file), a job that succeeded and one that failed, run by a real worker on the
Colab emulator; then headless Chromium (Debian's `chromium`) opens the task list, answers Flower's
login prompt, and the test reads the rendered table (filled by Flower's JavaScript from
/tasks/datatable): the succeeded job's row says SUCCESS, the failed one's FAILURE with its reason.
The screenshot is kept in `test-artifacts/` (`COLABQ_TEST_ARTIFACTS` names another folder; never
committed).

Without Chromium it skips locally and fails under CI (`COLABQ_REQUIRE_SERVICES`);
`ops/ensure-chromium.sh` installs it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from producer.broker import free_port
from tests.integration.chromium import Chromium, ChromiumError, find_chromium
from tests.integration.conftest import Fleet
from tests.integration.test_flower import AUTH, stop, submit, task, wait_events, wait_up
from worker.states import JobState

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("COLABQ_TEST_ARTIFACTS") or ROOT / "test-artifacts")

GOOD_RUN = "mnist-mlp-bs64-lr1e-3-browser-ok"
BAD_RUN = "mnist-mlp-bs64-lr1e-3-browser-exit3"
REASON = "FAILED (exit code 3)"

# The task list as a person reads it: the header labels shown above the table, and each row's
# cells as rendered text (Flower's datatable sets each row's id to its task's id, the job id).
READ_TABLE = """(() => {
  const heads = document.querySelector('.dataTables_scrollHead thead')
    || document.querySelector('#tasks-table thead');
  const labels = heads ? Array.from(heads.querySelectorAll('th')).map(th => th.innerText.trim())
    : [];
  const rows = Array.from(document.querySelectorAll('#tasks-table tbody tr'))
    .filter(tr => tr.id)
    .map(tr => ({id: tr.id, cells: Array.from(tr.cells).map(td => td.innerText.trim())}));
  const info = document.querySelector('.dataTables_info');
  return {labels, rows, info: info ? info.innerText : '', title: document.title};
})()"""


@pytest.fixture
def chromium_exe() -> str:
    exe = find_chromium()
    if exe is None:
        msg = "Chromium is needed: run ops/ensure-chromium.sh (apt-get install chromium)"
        if os.environ.get("COLABQ_REQUIRE_SERVICES") or os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return exe


@pytest.fixture
def documented_flower(fleet: Fleet) -> Iterator[str]:
    """Flower as docs/operations/flower.md starts it: the login file made 0600 first, then
    `colabq flower` (on a free port: tests run side by side)."""
    auth = fleet.root / "flower-auth"
    auth.touch(mode=0o600)
    auth.write_text(f"{AUTH[0]}:{AUTH[1]}\n")
    port = free_port()
    with open(fleet.root / "flower.log", "ab") as log:
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "colabq"), "flower", f"--port={port}"],
            cwd=ROOT, env={**fleet.env, "COLABQ_FLOWER_AUTH_FILE": str(auth),
                           "COLABQ_FLOWER_DB": str(fleet.root / "flower.db")},
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_up(url)
        wait_events(url)
        yield url
    finally:
        stop(proc)


def wait_flower_state(url: str, job_id: str, state: str, timeout_s: float = 60) -> None:
    """Until Flower's own state (its API) has the job's end: the page is read after that."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if task(url, job_id).get("state") == state:
            return
        time.sleep(0.2)
    raise AssertionError(f"Flower never showed {job_id} as {state}: {task(url, job_id)}")


def row_of(table: dict[str, Any], run: str) -> dict[str, str]:
    """The row whose args column names the run (how a person finds a job in the list), as
    {column label: its rendered text}."""
    labels = [label.lower() for label in table["labels"]]
    for row in table["rows"]:
        cells = dict(zip(labels, row["cells"], strict=False))
        if run in cells.get("args", ""):
            return cells
    raise AssertionError(f"no row of the task list names {run}: {table}")


@pytest.fixture
def browser(chromium_exe: str, fleet: Fleet) -> Iterator[Chromium]:
    """Headless Chromium with a fresh profile, started now: its start overlaps the jobs'."""
    chromium = Chromium(
        chromium_exe, fleet.root / "chromium-profile", credentials=AUTH,
        log=fleet.root / "chromium.log",
    )  # fmt: skip
    try:
        yield chromium
    finally:
        chromium.close()


@pytest.mark.usefixtures("chromium_exe")  # first: no Chromium, no fleet started for nothing
def test_a_person_sees_success_and_failure_with_its_reason_in_flower(
    fleet: Fleet, documented_flower: str, browser: Chromium
) -> None:
    started = time.monotonic()
    good = submit(fleet, "echo browser-ok\n", GOOD_RUN)
    bad = submit(fleet, "echo about-to-fail\nexit 3\n", BAD_RUN)
    browser.open_page()
    assert fleet.wait_terminal(good) is JobState.SUCCEEDED
    assert fleet.wait_terminal(bad) is JobState.FAILED
    # The list is read once Flower has both ends (it does not refresh by itself).
    wait_flower_state(documented_flower, good, "SUCCESS")
    wait_flower_state(documented_flower, bad, "FAILURE")
    jobs_done = time.monotonic()

    shot = ARTIFACTS / "flower-tasks.png"
    table: dict[str, Any] = {}
    try:
        browser.navigate(f"{documented_flower}/tasks")
        table = browser.wait_for(
            f"(() => {{ const t = {READ_TABLE}; const ids = t.rows.map(r => r.id); "
            f"return ids.includes({good!r}) && ids.includes({bad!r}) ? t : null; }})()",
            timeout_s=30,
            what="both jobs' rows in Flower's rendered task list",
        )
    finally:  # the screenshot is kept whatever the page showed
        try:
            print(f"screenshot of Flower's task list: {browser.screenshot(shot)}")
        except ChromiumError as exc:  # never hides why the wait failed
            print(f"no screenshot: {exc}")
    print(f"jobs {jobs_done - started:.1f} s, browser {time.monotonic() - jobs_done:.1f} s")

    assert any(u.startswith(f"{documented_flower}/tasks") for u in browser.auth_challenges), (
        f"Flower served its task list without asking for a login: {browser.auth_challenges}"
    )
    good_row, bad_row = row_of(table, GOOD_RUN), row_of(table, BAD_RUN)
    assert good_row["uuid"] == good and bad_row["uuid"] == bad, table
    assert good_row["state"] == "SUCCESS" and not good_row["exception"], good_row
    assert "gpu=T4" in good_row["args"], good_row
    assert bad_row["state"] == "FAILURE" and REASON in bad_row["exception"], bad_row
    assert "about-to-fail" not in str(table)  # the script's own text: never on the page
    assert shot.stat().st_size > 10_000
