"""The final report as people read it (`status JOB`): its rows in words, durations and limits,
the rate the run went at, compute units with their rate, the code and environment rows
(`report_code`) and its notes. The report itself is the worker's (`worker/session/finish.py`,
`worker/janitor/settle.py`); read back, a value of an unexpected shape is shown as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from producer.report_code import code_rows
from worker.progress import words as progress_words
from worker.utils import format_duration_s

if TYPE_CHECKING:
    from rich.table import Table


def _span(seconds: float | None) -> str:
    return "-" if seconds is None else format_duration_s(seconds)


def _units(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def final_report(report: dict[str, Any]) -> Table:
    from rich.table import Table
    from rich.text import Text

    t = Table(title="final report", show_header=False)
    t.add_column(style="bold")
    t.add_column(overflow="fold")
    for key in (
        "outcome",
        "reason",
        "commit",
        "colab_cli",
        "exit_code",
        "limits",
        "artifacts",
        "verification",
        "account",
        "runtime",
        "duration",
        "progress",
        "compute_units",
        "remaining_endpoint",
        "next_action",
    ):
        value = _limits_of(report) if key == "limits" else _report_value(key, report.get(key))
        t.add_row(key.replace("_", " "), "-" if value in (None, "") else str(value))
    for label, text in code_rows(report):
        t.add_row(label, Text(text))  # plain: `repairs: [name]` is not markup
    for note in report.get("notes") or ():
        t.add_row("note", str(note))
    return t


def _limits_of(report: dict[str, Any]) -> str | None:
    """The job's own time limit beside its wall cap (reports from before they were kept: none)."""
    ttl, wall = report.get("time_limit_s"), report.get("wall_cap_s")
    if not isinstance(ttl, int | float) or not isinstance(wall, int | float):
        return None
    return f"time limit {_span(ttl)} (wall cap {_span(wall)})"


def _report_value(key: str, value: Any) -> Any:
    """The report's structured values in words: durations, and units with their rate."""
    if key == "duration" and isinstance(value, dict):
        return (f"{_span(value.get('total_s'))} from submission to end; "
                f"GPU held {_span(value.get('held_s'))}")  # fmt: skip
    if key == "progress" and isinstance(value, dict):
        return progress_words.report_text(value)
    if key == "compute_units" and isinstance(value, dict):
        rate = value.get("rate_per_hour")
        at = f" ({value.get('gpu')} at {rate:.2f} units/h of GPU held)" if rate else ""
        return f"{_units(value.get('units'))}{at}"
    return value
