"""Seconds per epoch measured from earlier colabq runs, for the pre-flight's ETA.

An earlier run counts when it ran the same config file (its path in the training repository,
recorded on the job at submit) and ended. Its final report's measured rate comes first
(`progress.epoch_s`, from its console: `worker.progress`), whatever its outcome (a run stopped
at its time limit measured its rate all the same); else, for a run that SUCCEEDED and recorded
how many epochs it ran, its time from RUNNING to PERSISTING divided by its epochs. The median
of the newest few measured rates, else of the newest few timed runs. No run, no Redis: None,
which the ETA check reports as "not measured" (SKIP), never as a guess.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from worker.records.ledger import Ledger
    from worker.records.record import JobRecord
    from worker.settings import Settings

SCAN_LIMIT = 500
KEEP = 5


def measure_from_ledger(ledger: Ledger, reference: str) -> float | None:
    from worker.progress.words import measured_epoch_s
    from worker.states import TERMINAL, JobState

    rated: list[float] = []
    timed: list[float] = []
    for rec in ledger.list_jobs(SCAN_LIMIT):
        spec = rec.spec
        if rec.state not in TERMINAL or spec.config != reference:
            continue
        per = measured_epoch_s(_report(rec).get("progress"))
        if per is not None:
            rated.append(per)
            if len(rated) >= KEEP:
                break
        elif rec.state is JobState.SUCCEEDED and spec.epochs and len(timed) < KEEP:
            at = {h.state: h.at for h in reversed(ledger.history(rec.job_id))}
            start, end = at.get(JobState.RUNNING), at.get(JobState.PERSISTING)
            if start is not None and end is not None and end > start:
                timed.append((end - start) / spec.epochs)
    samples = rated or timed
    return statistics.median(samples) if samples else None


def _report(rec: JobRecord) -> dict[str, object]:
    """The record's final report (read back: anything but a JSON object is none)."""
    try:
        report = json.loads(rec.get("report") or "{}")
    except ValueError:
        return {}
    return report if isinstance(report, dict) else {}


def ledger_measurer(settings: Callable[[], Settings]) -> Callable[[str], float | None]:
    """A measurer that reaches Redis only when the ETA needs it (and tolerates its absence).
    `settings` (the command's, built when called) may raise: an invalid setting is reported."""

    def measure(reference: str) -> float | None:
        from worker.deps import connect_ledger
        from worker.errors import ColabqError

        loaded = settings()
        try:
            ledger = connect_ledger(loaded)
        except ColabqError:
            return None
        return measure_from_ledger(ledger, reference)

    return measure


def epochs_of(repo: Path, config: Path | None, given: float | None) -> float | None:
    """The epochs the run will do: as given, else the config's epochs key."""
    if given is not None or config is None:
        return given
    from producer.preflight.config_diff import flatten
    from producer.preflight.configs import load_config
    from producer.preflight.run import epochs_from_config

    try:
        loaded = load_config(config if config.is_absolute() else repo / config)
    except Exception:
        return None
    return epochs_from_config(flatten(loaded.data))
