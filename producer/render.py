"""Rich renderings of the ledger for people, and plain dicts of it for `--json`."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from worker.records.ledger import HistoryEntry, JobRecord
from worker.states import TERMINAL, JobState

if TYPE_CHECKING:
    from worker.janitor.run import JanitorReport
    from worker.records.fleet import WorkerCard

_STYLE = {
    JobState.SUCCEEDED: "green",
    JobState.CANCELLED: "yellow",
    JobState.RETAINED: "magenta",
}


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def _state(state: JobState) -> Text:
    style = _STYLE.get(state, "red" if state in TERMINAL else "cyan")
    return Text(state.name, style=style)


def jobs_table(records: list[JobRecord]) -> Table:
    t = Table(title="colabq jobs", show_lines=False)
    for col in ("job", "run name", "gpu", "state", "updated", "reason"):
        t.add_column(col, overflow="fold")
    for r in records:
        t.add_row(
            r.job_id,
            r.spec.run_name,
            r.spec.gpu.value,
            _state(r.state),
            _when(r.updated_at),
            r.reason,
        )
    return t


def report_of(rec: JobRecord) -> dict[str, Any] | None:
    raw = rec.get("report")
    return json.loads(raw) if raw else None


def job_detail(rec: JobRecord, history: list[HistoryEntry]) -> RenderableType:
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    s = rec.spec
    rows: list[tuple[str, str | Text]] = [
        ("job", rec.job_id),
        ("run name", s.run_name),
        ("commit", s.commit or "(none)"),
        ("gpu", f"{s.gpu.value}{' high-mem' if s.high_mem else ''}"),
        ("state", _state(rec.state)),
        ("reason", rec.reason),
        ("session", rec.get("session") or "-"),
        ("endpoint", rec.get("endpoint") or "-"),
    ]
    if rec.get("exit_code") is not None:
        rows.append(("exit code", rec.get("exit_code") or ""))
    if s.waivers:
        rows.append(("waived checks", ", ".join(s.waivers)))
    if s.preflight_digest:
        rows.append(("pre-flight digest", s.preflight_digest))
    for k, v in rows:
        head.add_row(k, v)
    hist = Table(title="history")
    for col in ("at", "state", "reason"):
        hist.add_column(col, overflow="fold")
    for h in history:
        hist.add_row(_when(h.at), _state(h.state), h.reason)
    parts: list[RenderableType] = [head, hist]
    report = report_of(rec)
    if report:
        parts.append(final_report(report))
    return Group(*parts)


def final_report(report: dict[str, Any]) -> Table:
    t = Table(title="final report", show_header=False)
    t.add_column(style="bold")
    t.add_column(overflow="fold")
    for key in (
        "outcome",
        "reason",
        "commit",
        "exit_code",
        "artifacts",
        "verification",
        "runtime",
        "remaining_endpoint",
        "next_action",
    ):
        value = report.get(key)
        t.add_row(key.replace("_", " "), "-" if value in (None, "") else str(value))
    for note in report.get("notes") or ():
        t.add_row("note", str(note))
    return t


def job_json(rec: JobRecord, history: list[HistoryEntry]) -> dict[str, Any]:
    return {
        "job_id": rec.job_id,
        "run_name": rec.spec.run_name,
        "gpu": rec.spec.gpu.value,
        "state": rec.state.value,
        "terminal": rec.state in TERMINAL,
        "reason": rec.reason,
        "updated_at": rec.updated_at,
        "session": rec.get("session"),
        "endpoint": rec.get("endpoint"),
        "exit_code": int(rec.get("exit_code") or 0) if rec.get("exit_code") else None,
        "waivers": list(rec.spec.waivers),
        "preflight_digest": rec.spec.preflight_digest,
        "history": [{"state": h.state.value, "at": h.at, "reason": h.reason} for h in history],
        "report": report_of(rec),
    }


def janitor_table(report: JanitorReport) -> RenderableType:
    """What a janitor pass saw, did (or would do) and left alone, and why."""
    if not report.ran:
        return Text("Another janitor pass holds the lock; nothing done.")
    mode = "dry run: nothing changed, no remote call" if report.dry_run else "acted"
    account = "" if report.account_measured else "; the account was not listed"
    table = Table(title=f"janitor ({mode}{account})", title_justify="left")
    for col in ("kind", "subject", "seen", "did", "why"):
        table.add_column(col, overflow="fold")
    for r in report.rows:
        table.add_row(r.kind, r.subject, r.seen, r.did, r.why)
    if not report.rows:
        return Group(table, Text("Nothing to reconcile."))
    return table


def workers_table(cards: list[WorkerCard], now: float) -> RenderableType:
    """The live workers, one row each."""
    if not cards:
        return Text("No live worker. Start one: `celery -A worker.celery_app worker -Q …`.")
    table = Table(title=f"{len(cards)} live worker(s)", title_justify="left")
    for col in ("worker", "host", "GPUs", "state", "job", "last beat"):
        table.add_column(col, overflow="fold")
    for c in cards:
        table.add_row(
            c.name, c.host, ",".join(c.gpus) or "-", "busy" if c.busy else "idle",
            c.job_id or "-", f"{max(0.0, now - c.beat_at):.0f}s ago",
        )  # fmt: skip
    return table
