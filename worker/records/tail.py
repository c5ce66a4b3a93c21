"""The tail of a job's VM console taken from the copy its final upload stored.

The wrapper's final upload stores the VM's console as it stands then (every line up to the job's
exit status). When the VM goes away before an attach client forwarded its last lines (it released
itself after that upload, a watchdog stopped it, the client's connection died with its proxy
token), the owner or the janitor forwards them from that copy before the job is reported ended.

`console_items` frames a console's bytes exactly as the attach cell (`worker/vm/attach.py.tmpl`)
frames them: one item per complete line, its end offset just past its newline, the wrapper's
sentinels told from the job's lines by the job's nonce. The items go through the same forward
script past the same recorded offset, so whichever of the store and an attach client forwards a
line first, the stream holds it once. Where the copy comes from (the store) is the caller's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from worker.records.forward import ForwardItem
from worker.records.ledger import Ledger

BATCH = 2000  # items per forward call, as the attach client batches them
Reader = Callable[[int], bytes | None]  # offset -> the stored copy from there on, None: no copy


def console_items(data: bytes, offset: int, nonce: str) -> list[ForwardItem]:
    """The complete lines of `data` (the console from byte `offset` on) as framed items; a
    last line without its newline is left out (the attach cell forwards one only once the
    wrapper is gone)."""
    head = f"__COLABQ_{nonce}_"
    items: list[ForwardItem] = []
    pos = offset
    for raw in data.split(b"\n")[:-1]:
        pos += len(raw) + 1
        text = raw.decode("utf-8", "replace").rstrip("\r")
        if text.startswith(head) and "__=" in text:
            what, value = text[len(head) :].split("__=", 1)
            items.append(ForwardItem(pos, "s", f"{what}={value}"))
        else:
            items.append(ForwardItem(pos, "l", text))
    return items


@dataclass(frozen=True)
class StoredTail:
    found: bool  # the store held the copy
    start: int  # the offset recorded before
    lines: int  # the console lines the copy held past it
    offset: int  # the offset recorded after

    def summary(self) -> str:
        """One line for the job's log ("" when there is nothing to say)."""
        if not self.found:
            return (
                "the console log of the job's final upload is not in the store: lines past "
                f"byte {self.start} of the VM's console may be missing from this log"
            )
        if not self.lines:
            return ""
        return (
            f"the last {self.lines} line(s) of the job's console (from byte {self.start}) came "
            "from the console log its final upload stored"
        )


def forward_stored_tail(
    ledger: Ledger, job_id: str, segment: int, nonce: str, read: Reader
) -> StoredTail:
    """Forward what the stored copy holds past the recorded offset, in order, in batches."""
    raw = ledger.read_watch(job_id).get("log_offset") or "0"
    start = int(raw) if raw.isdigit() else 0
    data = read(start)
    if data is None:
        return StoredTail(False, start, 0, start)
    items = console_items(data, start, nonce)
    at = start
    for i in range(0, len(items), BATCH):
        got = ledger.forward(job_id, segment, items[i : i + BATCH])
        if got < 0:
            break  # a newer segment: this copy is no longer the job's console
        at = got
    return StoredTail(True, start, sum(1 for it in items if it.kind == "l"), at)
