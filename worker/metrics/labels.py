"""Label values the metrics may carry, made safe where a value enters: read back from Redis
(a record, a card, a counter's field), it is trusted for nothing.

A value keeps letters, digits and `@ . _ + -` (anything else becomes `_`) and at most
`MAX_CHARS` characters; a GPU type is one colabq knows or `other`; no account is `none`. The
fields of the counters in Redis join labels with `SEP`, which no label can hold. A family's
distinct label values are capped (`Capped`): past the cap they count as `other`, so a damaged or
forged record cannot make a scrape unbounded. Pure.
"""

from __future__ import annotations

import re

from worker.spec import Gpu

SEP = "|"
MAX_CHARS = 64
NONE = "none"  # no account (a job never claimed), no user recorded
OTHER = "other"  # a GPU type colabq does not know, or a value past a family's cap
GPUS: tuple[str, ...] = tuple(g.value for g in Gpu)
_UNSAFE = re.compile(r"[^A-Za-z0-9@._+\-]")


def clean(value: str | bytes | None) -> str:
    """A label value from whatever was read (`none` for nothing)."""
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    text = _UNSAFE.sub("_", (value or "").strip())[:MAX_CHARS]
    return text or NONE


def text(value: str, most: int = 80) -> str:
    """Free text as a label value (a drain's reason): one line, printable, at most `most`."""
    return " ".join("".join(c if c.isprintable() else " " for c in value).split())[:most]


def gpu(value: str | bytes | None) -> str:
    """A GPU type's label: one of `GPUS`, else `other`."""
    text = clean(value).upper()
    return text if text in GPUS else OTHER


def split(field: str | bytes, parts: int) -> list[str] | None:
    """A counter field's labels (`SEP`-joined), or None when it does not have `parts` of them."""
    text = field.decode(errors="replace") if isinstance(field, bytes) else field
    got = text.split(SEP)
    return got if len(got) == parts else None


class Capped:
    """At most `most` distinct values of one label; later ones are `other`."""

    def __init__(self, most: int = 200) -> None:
        self.most = most
        self.seen: set[str] = set()

    def __call__(self, value: str) -> str:
        if value in self.seen:
            return value
        if len(self.seen) >= self.most:
            return OTHER
        self.seen.add(value)
        return value
