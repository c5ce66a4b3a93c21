"""Everything the emulated CLI writes to a terminal: lines, Click's boxed errors, tracebacks.

Lines are flushed one by one (the real CLI uses `typer.echo`); boxes are 80 columns wide like
rich's rendering to a pipe.
"""

from __future__ import annotations

import sys
import textwrap
import traceback
from types import TracebackType

WIDTH = 80


def echo(text: str = "", *, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


def write_bytes(chunk: bytes, *, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.flush()
    stream.buffer.write(chunk)
    stream.buffer.flush()


def box(title: str, lines: list[str], width: int = WIDTH, *, centre: bool = False) -> str:
    """A rich-style rounded panel with `title` in its top border (left, or centred)."""
    inner = width - 4
    if centre and title:
        label = f" {title} "
        left = (width - 2 - len(label)) // 2
        top = "─" * left + label + "─" * (width - 2 - len(label) - left)
    else:
        head = f"─ {title} " if title else ""
        top = head + "─" * (width - 2 - len(head))
    out = ["╭" + top + "╮"]
    for line in lines:
        pieces = textwrap.wrap(line, inner, replace_whitespace=False, drop_whitespace=False) or [""]
        out.extend("│ " + piece.ljust(inner) + " │" for piece in pieces)
    out.append("╰" + "─" * (width - 2) + "╯")
    return "\n".join(out)


def usage_error(message: str, usage: str, help_hint: str) -> None:
    """Click's usage error as Typer renders it: usage line, hint, boxed message (stderr)."""
    echo(f"Usage: {usage}", err=True)
    echo(f"Try '{help_hint}' for help.", err=True)
    echo(box("Error", [message]), err=True)


def exception_line(exc: BaseException, *, qualified: bool) -> str:
    cls = type(exc)
    name = cls.__qualname__
    if qualified and cls.__module__ not in ("builtins", "__main__"):
        name = f"{cls.__module__}.{name}"
    text = str(exc)
    return f"{name}: {text}" if text else name


def print_traceback(exc: BaseException, *, standard: bool) -> None:
    """A plain Python traceback (`TYPER_STANDARD_TRACEBACK=1`) or a rich-like boxed one."""
    tb: TracebackType | None = exc.__traceback__
    if standard:
        lines = traceback.format_exception(type(exc), exc, tb)
        sys.stderr.write("".join(lines[:-1]))
        echo(exception_line(exc, qualified=True), err=True)
        return
    body: list[str] = []
    for frame in traceback.extract_tb(tb):
        if body:
            body.append("")
        body.append(f"{frame.filename}:{frame.lineno} in {frame.name}")
        if frame.line:
            body.append(f"❱ {frame.lineno} │ {frame.line.strip()}")
    echo(box("Traceback (most recent call last)", body, centre=True), err=True)
    echo(exception_line(exc, qualified=False), err=True)
