"""Drawing a pre-flight report for a terminal with Rich.

Owns the table (check / verdict / what it saw / next action), the per-check detail lines, the
closing line that names what blocks the submission, and, for a clean report, the exact submit
command in a fenced code block ready to copy (the command text comes from the caller).
All report text is shown literally (never parsed as Rich markup).
"""

from __future__ import annotations

import io
import re

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from producer.preflight.report import Finding, Report, Verdict

MAX_DETAIL_LINES = 25
_STYLE = {
    Verdict.PASS: "bold green",
    Verdict.WARN: "bold yellow",
    Verdict.FAIL: "bold red",
    Verdict.SKIP: "bold magenta",
}


def _verdict_cell(finding: Finding, report: Report) -> Text:
    label = finding.verdict.value.upper()
    if finding.verdict is Verdict.FAIL and report.is_waived(finding):
        return Text(f"{label} (waived)", style="yellow")
    return Text(label, style=_STYLE[finding.verdict])


def build_table(report: Report) -> Table:
    table = Table(title="colabq pre-flight", show_lines=True, expand=True)
    table.add_column("Check", no_wrap=True)
    table.add_column("Verdict", no_wrap=True)
    table.add_column("What it saw", ratio=3)
    table.add_column("Next action", ratio=2)
    for f in report.findings:
        table.add_row(
            Text(f.check.value), _verdict_cell(f, report), Text(f.saw), Text(f.next_action)
        )
    return table


def _details(report: Report) -> list[RenderableType]:
    parts: list[RenderableType] = []
    for f in report.findings:
        if not f.details:
            continue
        shown = f.details[:MAX_DETAIL_LINES]
        body = Text(f"{f.check.value}:\n", style="bold")
        for line in shown:
            body.append(f"  {line}\n")
        if len(f.details) > len(shown):
            body.append(f"  … {len(f.details) - len(shown)} more\n")
        parts.append(body)
    return parts


def fenced(command: str, language: str = "bash") -> str:
    """A Markdown fenced code block whose fence is longer than any backtick run inside."""
    longest = max((len(run) for run in re.findall(r"`+", command)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{command}\n{fence}"


def render_report(report: Report, *, show_details: bool = True) -> Group:
    """The table, the details and the verdict line (digest and command are `print_report`'s)."""
    parts: list[RenderableType] = [build_table(report)]
    if show_details:
        parts += _details(report)
    if report.ok and report.waived_failures:
        parts.append(
            Text(
                f"Waived: {', '.join(report.waived_failures)} (recorded on the job).",
                style="yellow",
            )
        )
    if not report.ok:
        parts.append(
            Text(
                f"Submission blocked by: {', '.join(report.failed_checks)}. Fix them, "
                "or waive one with --waive NAME (recorded on the job).",
                style="bold red",
            )
        )
    return Group(*parts)


def print_report(console: Console, report: Report, *, submit_command: str | None = None) -> None:
    """Print the report; when it is clean, end with the submit command in a fenced block."""
    console.print(render_report(report))
    console.print(Text(f"report digest {report.digest}", style="dim"), soft_wrap=True)
    if report.ok and submit_command:
        console.print(Text("Pre-flight clean. Submit with:", style="bold green"))
        # soft_wrap: a long command must stay one line to be copied as-is.
        console.print(Text(fenced(submit_command)), soft_wrap=True)


def format_report(report: Report, *, submit_command: str | None = None, width: int = 120) -> str:
    """The printout as plain text (no colour): for logs, files and tests."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, force_terminal=False)
    print_report(console, report, submit_command=submit_command)
    return buffer.getvalue()
