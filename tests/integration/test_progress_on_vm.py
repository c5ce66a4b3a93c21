"""A run's progress on the emulator, through a real worker (issue 27): a job that prints the real
tqdm package's bars (`\\r` updates, the line ending only with the bar) is seen as it moves, and
`colabq status` shows its fraction, its rate and an ETA within 10 % of its real end; a job whose
rate projects its end past its own time limit is warned of once, well before the limit, as an
event and a notification through `colabq notifier`; the final report records the rate."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tqdm import tqdm
from typer.testing import CliRunner

from producer.cli import app
from tests.integration.conftest import Fleet
from tests.integration.test_run_on_vm import submit, wait_for
from worker.records import events
from worker.states import JobState

pytestmark = pytest.mark.integration
runner = CliRunner()
COLABQ = str(Path(sys.executable).parent / "colabq")


def tqdm_frames(steps: int, step_s: float) -> list[str]:
    """The bytes the real tqdm prints for a bar of `steps` at `step_s` a step (its own
    `format_meter`, each update after a `\r`, padded over a longer one before it)."""
    frames, before = [], 0
    for n in range(steps + 1):
        meter = tqdm.format_meter(n, steps, n * step_s)
        frames.append("\r" + meter + " " * max(before - len(meter), 0))
        before = len(meter)
    return frames


def tqdm_job(steps: int, step_s: float) -> str:
    """A job that runs `steps` steps of `step_s` under the real tqdm where the VM's Python has
    it; where it has not (the emulator's job user may only reach a Python without it), it prints
    the same bytes, made by tqdm here, at the same pace."""
    return (
        "python3 - <<'PY'\n"
        "import sys, time\n"
        "try:\n"
        "    from tqdm import tqdm\n"
        "except ImportError:\n"
        "    print('tqdm: its bytes', flush=True)\n"
        f"    for i, frame in enumerate({tqdm_frames(steps, step_s)!r}):\n"
        f"        time.sleep({step_s} if i else 0)\n"
        "        sys.stderr.write(frame)\n"
        "        sys.stderr.flush()\n"
        "    sys.stderr.write('\\n')\n"
        "else:\n"
        "    print('tqdm: the package', flush=True)\n"
        f"    for _ in tqdm(range({steps}), mininterval=0.2):\n"
        f"        time.sleep({step_s})\n"
        "PY\n"
    )


def status_json(fleet: Fleet, *args: str) -> Any:
    result = runner.invoke(app, ["status", *args, "--json"], env=fleet.env)
    assert result.exit_code in (0, 9), result.output  # 9: not over yet
    return json.loads(result.output)


def progress_of(fleet: Fleet, job_id: str) -> dict[str, Any] | None:
    got: dict[str, Any] | None = status_json(fleet, job_id)["progress"]
    return got


def wait_progress(fleet: Fleet, job_id: str, fraction: float, timeout_s: float = 120) -> Any:
    """`status JOB --json`'s progress once it reaches `fraction` (polled twice a second: the
    command's own start-up is not free on a loaded host)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = progress_of(fleet, job_id)
        if got is not None and (got.get("fraction") or 0) >= fraction:
            return got
        time.sleep(0.5)
    raise AssertionError(f"the run's progress never reached {fraction:.0%}")


def test_status_shows_a_tqdm_runs_fraction_rate_and_an_eta_near_its_real_end(
    fleet: Fleet,
) -> None:
    steps, step_s = 100, 0.4  # 40 s at 2.5 it/s
    job_id = submit(fleet, tqdm_job(steps, step_s), wall="10m")
    # A third of the way: the bar's line has not ended, so this is its `\r` updates' doing.
    seen = wait_progress(fleet, job_id, 0.3)
    assert seen["unit"] == "it" and seen["source"] == "tqdm"
    assert seen["total"] == steps and seen["rate_per_s"] == pytest.approx(1 / step_s, rel=0.1)
    assert fleet.ledger.read_watch(job_id).get("exec_exit") is None  # still running
    eta_at = float(seen["eta_at"])

    # The list and the job's page say it in words: fraction, rate, ETA in local time.
    listed = runner.invoke(app, ["status"], env={**fleet.env, "COLUMNS": "120"})
    assert re.search(r"\d+% [\d.]+it/s (\w{3} )?\d\d:\d\d", listed.output), listed.output
    row = next(r for r in status_json(fleet) if r["job_id"] == job_id)
    assert row["progress"]["fraction"] >= 0.3
    page = runner.invoke(app, ["status", job_id], env={**fleet.env, "COLUMNS": "200"})
    assert re.search(
        r"progress +\d+% \(\d+/100 it\), [\d.]+ it/s, ETA (\w{3} [\d-]+ )?\d\d:\d\d", page.output
    ), page.output

    assert fleet.wait_terminal(job_id, timeout_s=180) is JobState.SUCCEEDED
    watch = fleet.ledger.read_watch(job_id)
    started, finished = float(watch["exec_started"]), float(watch["exec_finished"])
    took = finished - started
    off = abs(eta_at - finished)
    print(f"ETA {eta_at - started:.1f}s after start, ended {took:.1f}s after: off by {off:.2f}s "
          f"({off / took:.1%})")  # fmt: skip
    assert abs(eta_at - finished) <= 0.10 * took

    # The final report records the rate it measured, with its unit.
    report = fleet.ledger.get(job_id).get("report")
    assert report is not None
    measured = json.loads(report)["progress"]
    assert measured["unit"] == "it" and measured["fraction"] == 1.0
    assert measured["rate_per_s"] == pytest.approx(1 / step_s, rel=0.15)
    assert status_json(fleet, job_id)["progress"]["fraction"] == 1.0


def start_notifier(fleet: Fleet) -> tuple[subprocess.Popen[bytes], Path]:
    """`colabq notifier` with one command hook, `default` (every job's terminal states), that
    appends each event it gets to a file."""
    notified, targets = fleet.root / "notified", fleet.root / "webhooks"
    targets.write_text(f"default = exec sh -c 'cat >> {notified}; echo >> {notified}'\n")
    targets.chmod(0o600)
    log = fleet.root / "notifier.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [COLABQ, "notifier"], env={**fleet.env, "COLABQ_WEBHOOKS_FILE": str(targets)},
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    wait_for(lambda: "targets" in log.read_text(), "the notifier", 60)
    return proc, notified


def told(notified: Path) -> list[dict[str, Any]]:
    text = notified.read_text() if notified.exists() else ""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_a_run_that_will_overrun_its_time_limit_is_warned_of_once_early(fleet: Fleet) -> None:
    notifier, notified = start_notifier(fleet)
    try:
        ttl_s = 40.0
        # 200 steps at 0.5 s: 100 s of work under a 40 s limit.
        job_id = submit(fleet, tqdm_job(200, 0.5), "--ttl", f"{ttl_s:g}s", wall="5m")

        def warned() -> list[events.Event]:
            found = events.read(fleet.ledger.r, fleet.ledger.keys, job=job_id)
            return [e for e in found if e.kind == "overrun"]

        wait_for(warned, "the overrun warning", 120)
        assert fleet.ledger.get(job_id).state is JobState.RUNNING
        watch = fleet.ledger.read_watch(job_id)
        limit_at = float(watch["exec_started"]) + float(watch["exec_ttl"])
        warning = warned()[0]
        early_s = limit_at - warning.at
        print(f"warned {early_s:.1f}s before the {ttl_s:g}s limit: {warning.reason}")
        assert early_s >= ttl_s / 3, early_s  # well before the limit
        assert re.search(r"it ends \S+ after its 40s time limit: checkpoint, or resubmit with "
                         r"a longer --ttl", warning.reason), warning.reason  # fmt: skip
        said = runner.invoke(app, ["events", job_id], env=fleet.env).output
        assert "overrun" in said and "time limit" in said, said
        assert status_json(fleet, job_id)["progress"]["projected_overrun"] is True

        assert fleet.wait_terminal(job_id, timeout_s=180) is JobState.TIMED_OUT
        assert len(warned()) == 1  # once
        wait_for(lambda: any(e["to"] == "timed_out" for e in told(notified)), "the notifier", 60)
        kinds = [(e["job"], e["kind"]) for e in told(notified)]
        assert kinds.count((job_id, "overrun")) == 1, kinds
        overrun = next(e for e in told(notified) if e["kind"] == "overrun")
        assert overrun["reason"] == warning.reason
        report = json.loads(fleet.ledger.get(job_id).get("report") or "{}")
        assert report["progress"]["rate_per_s"] == pytest.approx(2.0, rel=0.15)
        assert report["progress"]["fraction"] < 0.5
    finally:
        notifier.terminate()
        notifier.wait(timeout=20)
