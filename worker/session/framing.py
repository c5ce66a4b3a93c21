"""The attach cell's output as the attach client reads it: each framed item
`@<nonce>:<start>:<end>:<kind>:<text>` of a chunk (one regular expression over the chunk when
every line is framed, as nearly always), and the runs of items that follow on from each other,
a gap (output lost on the way) ending the chain. Light: the attach client's, like `attach.py`.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from worker.records.forward import Lines


def framed_pattern(nonce: str) -> re.Pattern[str]:
    """`@<nonce>:<start>:<end>:<kind>:<text>`, one per line of a chunk (offsets in decimal
    without leading zeros: equal text is then an equal number). Kind `p` is a bar's update
    (`worker.progress.feed`)."""
    num = "(0|[1-9][0-9]*)"
    return re.compile(rf"^@{re.escape(nonce)}:{num}:{num}:([lsep]):(.*)$", re.M)


def parse_framed(line: str, nonce: str) -> tuple[str, str, str, str] | None:
    """`@<nonce>:<start>:<end>:<kind>:<text>` -> (start, end, kind, text), the offsets in
    decimal; None for anything else (the CLI's own chatter)."""
    head = f"@{nonce}:"
    if not line.startswith(head):
        return None
    parts = line[len(head) :].split(":", 3)
    if len(parts) != 4 or parts[2] not in ("l", "s", "e", "p"):
        return None
    try:
        start, end = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return str(start), str(end), parts[2], parts[3]


def parse_chunk(
    text: str, nonce: str, pattern: re.Pattern[str]
) -> tuple[list[tuple[str, str, str, str]], list[str]]:
    """The framed items of `text` (whole lines, without the last newline) and its other lines.
    One regular expression over the chunk when every line is framed, as nearly always; line by
    line (`parse_framed`) when one is not."""
    rows: list[tuple[str, str, str, str]] = pattern.findall(text)
    if len(rows) == text.count("\n") + 1:
        return rows, []
    rows, other = [], []
    for line in text.split("\n"):
        got = parse_framed(line, nonce)
        if got is None:
            other.append(line)
        else:
            rows.append(got)
    return rows, other


class Run(NamedTuple):
    """Items that follow on from the ones before them, as one batch for the script; `gap` when
    the next item did not start where the last one ended (output was lost); `progress`, the
    run's progress read from them, when it changed (`worker.progress.feed`)."""

    lines: Lines
    gap: str = ""
    progress: str = ""


class Chain:
    """Cuts the parsed items into runs, checking each starts where the one before it ended."""

    def __init__(self, offset: int) -> None:
        self.expected = str(offset)
        self.broken = ""

    def take(self, rows: list[tuple[str, str, str, str]]) -> Run | None:
        """The run of `rows` that follows on; None once the chain broke (nothing after a gap
        is forwarded) or for no rows."""
        if self.broken or not rows:
            return None
        starts, ends, kinds, payloads = zip(*rows, strict=True)
        n = len(rows)
        if starts[0] != self.expected or starts[1:] != ends[:-1]:
            prev = self.expected
            for i, start in enumerate(starts):
                if start != prev:
                    n, self.broken = i, f"expected offset {prev}, got {start}"
                    break
                prev = ends[i]
        if n:
            self.expected = ends[n - 1]
        lines = Lines(" ".join(ends[:n]), "".join(kinds[:n]), "\n".join(payloads[:n]))
        return Run(lines, self.broken)
