"""Rich renderings of the ledger for people, and plain dicts of it for `--json`.

rich is imported by the functions that draw (importing it costs about 0.04 s of start-up), so
that `--json` and a list's footer line alone do not import it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from producer.report_view import final_report as final_report  # (its callers import it here)
from worker.colab import rates
from worker.progress import words as progress_words
from worker.states import TERMINAL, JobState
from worker.timelimit import limits_json, limits_text
from worker.utils import format_duration_s

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.text import Text

    from producer.joblist import JobRow, Listing
    from worker.progress.record import Limit, Reading
    from worker.records.record import HistoryEntry, JobRecord

    Progress = tuple[Reading | None, Limit | None]

_STYLE = {
    JobState.SUCCEEDED: "green",
    JobState.CANCELLED: "yellow",
    JobState.RETAINED: "magenta",
}


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def _state(state: JobState) -> Text:
    from rich.text import Text

    style = _STYLE.get(state, "red" if state in TERMINAL else "cyan")
    return Text(state.name, style=style)


def _age(seconds: float | None) -> str:
    """A duration in at most 6 characters: 45s, 12m05s, 3h07m, 2d04h."""
    return "-" if seconds is None else format_duration_s(seconds)


def _units(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


# The list's columns; `--json` uses the same names (a duration's with its unit: `elapsed_s`).
LIST_COLUMNS = ("id", "run", "state", "gpu", "worker", "elapsed", "cu")
# Beside them when a row has one: how far its run got, how fast, when it ends (local time; `!`
# when that is past its time limit).
PROGRESS_COLUMN = "progress"


def _held_ever(fields: Mapping[str, str | None]) -> bool:
    return bool(fields.get("held_s") or fields.get("held_since"))


def _row_state(row: JobRow) -> Text:
    from rich.text import Text

    return Text("DAMAGED", style="bold red") if row.state is None else _state(row.state)


def jobs_table(
    listing: Listing, now: float, *, next_page: str | None = None, width: int = 80
) -> RenderableType:
    """One line per job in 80 columns: short ids, long run and worker names cut with an
    ellipsis; a footer with how many are shown of how many matched, and the next page."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    if not listing.rows:
        return Text(footer(listing, next_page))
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
    shown = any(row.progress is not None for row in listing.rows)
    columns = (*LIST_COLUMNS, PROGRESS_COLUMN) if shown else LIST_COLUMNS
    for col in columns:
        numeric = col in ("elapsed", "cu")
        flexible = col in ("run", "worker")
        t.add_column(
            col, justify="right" if numeric else "left", no_wrap=not flexible,
            overflow="ellipsis", max_width=18 if col == "worker" else None,
        )  # fmt: skip
    cells: list[list[str | Text]] = [
        [
            listing.short[row.job_id],
            row.run,
            _row_state(row),
            row.gpu,
            (row.worker or "-")[:18],
            _age(row.elapsed_s(now)),
            _units(row.cu(now)) if _held_ever(row.fields) else "-",
            *([_progress_cell(row, now)] if shown else []),
        ]
        for row in listing.rows
    ]
    # The run column gets what the others leave of the width (80 at least fits), cut in the
    # middle: a sweep's points differ at the end of their names (`...-lr0.05-seed1`).
    others = sum(
        max(len(col), *(len(c[i]) for c in cells)) for i, col in enumerate(columns) if col != "run"
    )
    room = max(12, width - others - 2 * (len(columns) - 1))
    for c in cells:
        c[1] = _middle(str(c[1]), room)
        t.add_row(*c)
    return Group(t, Text(footer(listing, next_page), style="dim"))


def _progress_cell(row: JobRow, now: float) -> str:
    if row.progress is None:
        return "-"
    live = row.state is JobState.RUNNING
    return progress_words.cell(row.progress, row.limit, now, live=live)


def progress_json(progress: Progress, now: float) -> dict[str, Any] | None:
    reading, limit = progress
    return None if reading is None else progress_words.to_json(reading, limit, now)


def console_width() -> int:
    """The terminal's width as Rich sees it (COLUMNS, the tty, else 80)."""
    from rich.console import Console

    return Console().width


def _middle(text: str, width: int) -> str:
    """`text` in at most `width` characters, an ellipsis in its middle."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


def footer(listing: Listing, next_page: str | None) -> str:
    """How many rows are shown of how many matched, and the command for the next page; the
    whole list when no row is shown."""
    shown, matched = len(listing.rows), listing.matched
    if matched == 0:
        return "No job matched."
    if shown == 0:
        return f"Page {listing.page} is past the end: {matched} matched, {listing.pages} page(s)."
    first = (listing.page - 1) * listing.limit + 1
    text = f"{first}-{first + shown - 1} of {matched} matched, newest first."
    if listing.page < listing.pages and next_page:
        text += f"\nNext page: {next_page}"
    return text


def row_json(row: JobRow, short_id: str, now: float) -> dict[str, Any]:
    """A list row for `--json`: the table's columns by the same names, and more."""
    held = row.held_s(now)
    return {
        "id": short_id,
        "job_id": row.job_id,
        "run": row.run,
        "state": row.state_value,
        "gpu": row.gpu,
        "worker": row.worker or None,
        "account": row.fields.get("account"),
        "elapsed_s": _rounded(row.elapsed_s(now)),
        "cu": _rounded(row.cu(now), 4),
        "held_s": _rounded(held),
        "user": row.user or None,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "terminal": row.state in TERMINAL,
        "problem": row.problem or None,
        "progress": progress_json((row.progress, row.limit), now),
    }


def _rounded(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def shown_reason(rec: JobRecord, now: float) -> str:
    """The record's reason; for a job waiting for a GPU, with its next try made relative."""
    from worker.fleet.capacity import waiting_line

    retry_at = rec.get("retry_at")
    if rec.state is not JobState.QUEUED or not retry_at:
        return rec.reason
    return waiting_line(rec.reason, float(retry_at), now)


def costs(rec: JobRecord, now: float) -> dict[str, Any]:
    """A job's elapsed time (submission to now, or to its end), the time it held a GPU, and
    the compute units that cost (rate x held time)."""
    end = rec.updated_at if rec.state in TERMINAL else now
    held = rates.held_s(rec.fields, now)
    gpu = rec.get("gpu") or rec.spec.gpu.value
    return {
        "elapsed_s": round(max(end - rec.created_at, 0.0), 1),
        "held_s": round(held, 1),
        "cu": _rounded(rates.units(gpu, held), 4),
        "rate_per_hour": rates.rate_per_hour(gpu),
    }


def report_of(rec: JobRecord) -> dict[str, Any] | None:
    raw = rec.get("report")
    return json.loads(raw) if raw else None


def job_detail(
    rec: JobRecord,
    history: list[HistoryEntry],
    now: float | None = None,
    progress: Progress = (None, None),
) -> RenderableType:
    from rich.console import Group
    from rich.table import Table

    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    s, at = rec.spec, time.time() if now is None else now
    c = costs(rec, at)
    rate, gpu = c["rate_per_hour"], rec.get("gpu") or s.gpu.value
    choices = ",".join(g.value for g in s.gpus)
    rows: list[tuple[str, str | Text]] = [
        ("job", rec.job_id),
        ("run name", s.run_name),
        ("commit", s.commit or "(none)"),
        (
            "gpu",
            f"{gpu}{' high-mem' if s.high_mem else ''}"
            + (f" (asked for {choices}, in that order)" if len(s.gpus) > 1 else ""),
        ),
        ("state", _state(rec.state)),
        ("reason", shown_reason(rec, at)),
        ("submitted by", rec.get("user") or s.submitted_by or "-"),
        ("worker", rec.get("worker") or "-"),
        ("colab account", rec.get("account") or "-"),
        ("session", rec.get("session") or "-"),
        ("endpoint", rec.get("endpoint") or "-"),
        ("limits", limits_text(s)),
        *_progress_rows(progress, at),
        ("elapsed", _age(c["elapsed_s"])),
        ("gpu held", _age(c["held_s"])),
        ("compute units", _units(c["cu"], 3) + (f" ({gpu} at {rate:.2f}/h held)" if rate else "")),
    ]
    if rec.get("exit_code") is not None:
        rows.append(("exit code", rec.get("exit_code") or ""))
    if rec.get("retry_of"):
        rows.append(("retry of", f"{rec.get('retry_of')} (submitted again after it ended)"))
    if rec.get("retried_as"):
        rows.append(("retried as", rec.get("retried_as") or ""))
    if s.waivers:
        rows.append(("waived checks", ", ".join(s.waivers)))
    if s.preflight_digest:
        rows.append(("pre-flight digest", s.preflight_digest))
    for k, v in rows:
        head.add_row(k, v)
    parts: list[RenderableType] = [head, _history_table(history)]
    report = report_of(rec)
    if report:
        parts.append(final_report(report))
    return Group(*parts)


def _history_table(history: list[HistoryEntry]) -> RenderableType:
    from rich.table import Table

    hist = Table(title="history")
    for col in ("at", "state", "reason", "by"):
        hist.add_column(col, overflow="fold")
    for h in history:
        what = f"{h.action} requested: {h.reason}" if h.action else h.reason
        by = f"{h.actor}@{h.host}" if h.actor else "-"
        hist.add_row(_when(h.at), _state(h.state), what, by)
    return hist


def _progress_rows(progress: Progress, now: float) -> list[tuple[str, str | Text]]:
    """The run's progress (`worker.progress.words.summary`), when its console said any."""
    reading, limit = progress
    if reading is None:
        return []
    return [("progress", progress_words.summary(reading, limit, now))]


def job_json(
    rec: JobRecord,
    history: list[HistoryEntry],
    now: float | None = None,
    progress: Progress = (None, None),
) -> dict[str, Any]:
    """One job for `status JOB --json`: its fields, history and report, and the list's."""
    c = costs(rec, time.time() if now is None else now)
    return {
        "id": rec.job_id,
        "run": rec.spec.run_name,
        "worker": rec.get("worker"),
        "account": rec.get("account"),
        "user": rec.get("user") or rec.spec.submitted_by or None,
        "elapsed_s": c["elapsed_s"],
        "held_s": c["held_s"],
        "cu": c["cu"],
        "rate_per_hour": c["rate_per_hour"],
        "job_id": rec.job_id,
        "run_name": rec.spec.run_name,
        "gpu": rec.get("gpu") or rec.spec.gpu.value,
        "gpus": [g.value for g in rec.spec.gpus],
        "state": rec.state.value,
        "terminal": rec.state in TERMINAL,
        "reason": shown_reason(rec, time.time()),
        "retry_at": float(rec.get("retry_at") or 0) or None,
        "put_back": json.loads(rec.get("putbacks") or "[]"),
        "updated_at": rec.updated_at,
        "session": rec.get("session"),
        "endpoint": rec.get("endpoint"),
        "exit_code": int(rec.get("exit_code") or 0) if rec.get("exit_code") else None,
        **limits_json(rec.spec),
        "progress": progress_json(progress, time.time() if now is None else now),
        "retry_of": rec.get("retry_of"),
        "retried_as": rec.get("retried_as"),
        "waivers": list(rec.spec.waivers),
        "preflight_digest": rec.spec.preflight_digest,
        "history": [
            {
                "state": h.state.value,
                "at": h.at,
                "reason": h.reason,
                "actor": h.actor,
                "host": h.host,
                "action": h.action or None,
            }
            for h in history
        ],
        "report": report_of(rec),
    }


def workers_table(rows: list[dict[str, Any]], now: float) -> RenderableType:
    """The live workers, one row each (`producer.commands.fleet.worker_row`): a drained one
    with its reason, since when and its host failures in a row."""
    from rich.table import Table
    from rich.text import Text

    if not rows:
        return Text("No live worker. Start one: `colabq worker --gpu T4`.")
    # Their Colab accounts: in the title when they share one, else a column.
    accounts = sorted({str(r.get("account") or "-") for r in rows})
    one = f", Colab account {accounts[0]}" if len(accounts) == 1 and accounts != ["-"] else ""
    table = Table(title=f"{len(rows)} live worker(s){one}", title_justify="left")
    cols = ("worker", "host", *(("account",) if len(accounts) > 1 else ()), "GPUs", "state",
            "job", "last beat")  # fmt: skip
    for col in cols:
        table.add_column(col, overflow="fold")
    for r in rows:
        state = str(r["state"]).upper()  # as a job's state in a table; `--json` has the value
        if r["state"] == "drained":
            since = max(0.0, now - float(r["drained_since"] or now))
            how = "by hand" if r["drained_by_hand"] else f"{r['failures_in_row']} failure(s)"
            state = f"DRAINED {since:.0f}s ({how}): {r['drain_reason']}"
        account = (str(r.get("account") or "-"),) if len(accounts) > 1 else ()
        table.add_row(
            str(r["name"]), str(r["host"]), *account, ",".join(r["gpus"]) or "-", state,
            str(r["job_id"] or "-"), f"{max(0.0, now - float(r['beat_at'])):.0f}s ago",
        )  # fmt: skip
    return table
