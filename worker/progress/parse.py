"""What one console line says about a run's progress, in the formats training code prints.

- tqdm: `desc:  45%|████▌     | 45/100 [00:09<00:11,  4.90it/s, loss=0.3]` (a bar with a total;
  one without, `5it [00:01, 4.9it/s]`, says no fraction and is left out). A bar rewrites itself
  with `\\r`, so a line holds its updates: the latest one counts. A nested bar (tqdm's `position`
  1 and more, e.g. an inner loop's) moves the cursor back up (`ESC[A`) after each update: it is
  told from the outermost bar by that.
- Lightning: its tqdm bar's description is `Epoch N` (or `Epoch N/M`): the epoch is in the bar.
- Keras: a line `Epoch 3/10` (1-based), then its step bar `12/100 [==>....] - ETA: 5s` (Keras 3:
  `12/100 ━━━━━━ 2s 20ms/step`).
- Hugging Face Trainer: its log dict `{'loss': 0.45, 'learning_rate': 4e-05, 'epoch': 1.25}`.
- Anything else: a line `colabq-progress step=N total=M` (anywhere in the line, so that a
  logger's prefix is fine).

Cheap on purpose: each parser is O(line) with anchored, bounded patterns (no backtracking that
grows with the input), and a line's `\\r` updates are read from its end, a few at most.
Combining what the lines say into a run's position is `track`'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# How many of a line's latest `\r` updates are looked at (from its end): a nested bar's line
# holds two or three; a bar that ran for hours holds millions.
MAX_SEGMENTS = 8
MAX_SEGMENT_CHARS = 2000
_SI = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "Z": 1e21,
       "Y": 1e24}  # fmt: skip
_NUM = r"([0-9]{1,15}(?:\.[0-9]{1,9})?)([kMGTPEZY]?)"
_COUNT = re.compile(rf"{_NUM}/{_NUM}\s\[([^\]]{{0,300}})\]")
_UNIT = re.compile(r"(?:[0-9.?]{1,20}([A-Za-z]{1,16})/s|s/([A-Za-z]{1,16}))")
_ANSI = re.compile(r"\x1b\[[0-9;?]{0,20}[A-Za-z]")
_UP = "\x1b[A"
_DESC_EPOCH = re.compile(r"[Ee]poch[ _]?([0-9]{1,9})(?:\s?/\s?([0-9]{1,9}))?")
_HEADER = re.compile(r"Epoch ([0-9]{1,9})/([0-9]{1,9})")
_KERAS_STEP = re.compile(r"([0-9]{1,12})/([0-9]{1,12}) (?:\[[=>.]{0,300}\]|━)")
_HF_EPOCH = re.compile(r"'epoch': ([0-9]{1,9}(?:\.[0-9]{1,12})?(?:[eE][-+]?[0-9]{1,3})?)[,}]")
_EXPLICIT = re.compile(
    r"(?:^|\s)colabq-progress[ \t]+step=([0-9]{1,15}(?:\.[0-9]{1,9})?)"
    r"[ \t]+total=([0-9]{1,15}(?:\.[0-9]{1,9})?)(?:\s|$)"
)


@dataclass(frozen=True, slots=True)
class Bar:
    """A progress bar with a total: tqdm's (`keras` False) or Keras' step bar."""

    n: float
    total: float
    unit: str = "it"
    nested: bool = False  # a bar below the outermost (tqdm `position` >= 1)
    keras: bool = False
    epoch: int | None = None  # the number in a description `Epoch N` (Lightning)
    epochs: int | None = None  # and M of `Epoch N/M`


@dataclass(frozen=True, slots=True)
class Header:
    """Keras' `Epoch N/M` line: epoch N (from 1) of M."""

    epoch: int
    epochs: int


@dataclass(frozen=True, slots=True)
class TrainerLog:
    """Hugging Face Trainer's log dict: the epochs done so far (1.25: a quarter into the 2nd)."""

    epoch: float


@dataclass(frozen=True, slots=True)
class Explicit:
    """`colabq-progress step=N total=M`: the job says where it is."""

    step: float
    total: float


Found = Bar | Header | TrainerLog | Explicit


def _si(digits: str, suffix: str) -> float:
    return float(digits) * _SI[suffix]


def parse_explicit(text: str) -> Explicit | None:
    m = _EXPLICIT.search(text) if "colabq-progress" in text else None
    if m is None:
        return None
    step, total = float(m[1]), float(m[2])
    return Explicit(step, total) if total > 0 and step <= total else None


def parse_header(text: str) -> Header | None:
    """Keras' epoch line: exactly `Epoch N/M` (whitespace around it aside), 1 <= N <= M."""
    m = _HEADER.fullmatch(text.strip()) if "Epoch" in text else None
    if m is None:
        return None
    epoch, epochs = int(m[1]), int(m[2])
    return Header(epoch, epochs) if 1 <= epoch <= epochs else None


def parse_trainer_log(text: str) -> TrainerLog | None:
    """A Trainer log dict: a line that is one `{...}` holding `'epoch': <number>`."""
    t = text.strip()
    if not (t.startswith("{") and t.endswith("}")) or "'epoch'" not in t:
        return None
    m = _HF_EPOCH.search(t)
    return TrainerLog(float(m[1])) if m is not None else None


def parse_bar(segment: str) -> Bar | None:
    """One update of a bar (a line's text between two `\\r`), tqdm's or Keras'."""
    nested = segment.rstrip(" ").endswith(_UP)
    text = _ANSI.sub("", segment) if "\x1b" in segment else segment
    if len(text) > MAX_SEGMENT_CHARS:
        return None
    cut = text.find("%|")
    if cut >= 0:
        return _tqdm(text, cut, nested)
    m = _KERAS_STEP.match(text.lstrip())
    if m is None:
        return None
    n, total = float(m[1]), float(m[2])
    return Bar(n, total, "step", nested, keras=True) if total > 0 and n <= total else None


def _tqdm(text: str, cut: int, nested: bool) -> Bar | None:
    """`[desc: ]pct%|bar| n/total [times]`, the `%|` at `cut`."""
    start = cut
    while start > 0 and text[start - 1].isdigit() and cut - start < 3:
        start -= 1
    if start == cut:
        return None
    bar_end = text.find("|", cut + 2)
    if bar_end < 0:
        return None
    m = _COUNT.match(text, bar_end + 1 + (text[bar_end + 1 : bar_end + 2] == " "))
    if m is None:
        return None
    n, total = _si(m[1], m[2]), _si(m[3], m[4])
    if total <= 0 or n > total * 1.000001:
        return None
    u = _UNIT.search(m[5])
    unit = (u[1] or u[2]) if u is not None else "it"
    desc = text[:start].rstrip().rstrip(":").strip()
    epoch = epochs = None
    d = _DESC_EPOCH.fullmatch(desc) if desc else None
    if d is not None:
        epoch, epochs = int(d[1]), int(d[2]) if d[2] else None
    return Bar(n, total, unit, nested, epoch=epoch, epochs=epochs)


def latest_bars(line: str) -> list[Bar]:
    """The latest update of the outermost bar and of a nested one in `line` (either may be
    missing), in the order they were printed; at most `MAX_SEGMENTS` updates are read."""
    outer: tuple[int, Bar] | None = None
    inner: tuple[int, Bar] | None = None
    end = len(line)
    for i in range(MAX_SEGMENTS):
        start = line.rfind("\r", 0, end) + 1
        segment = line[start:end]
        if segment.strip():
            bar = parse_bar(segment) if "/" in segment else None
            if bar is not None and bar.nested and inner is None:
                inner = (-i, bar)
            elif bar is not None and not bar.nested and outer is None:
                outer = (-i, bar)
            if outer is not None and inner is not None:
                break
        if start == 0:
            break
        end = start - 1
    found = sorted((x for x in (outer, inner) if x is not None), key=lambda x: x[0])
    return [b for _, b in found]


def parse_line(line: str) -> list[Found]:
    """What `line` (a console line, `\\r` updates and all) says, in the order printed."""
    if "colabq-progress" in line and (explicit := parse_explicit(line)) is not None:
        return [explicit]
    if "\r" not in line and "%|" not in line:
        found = parse_header(line) or parse_trainer_log(line)
        if found is not None:
            return [found]
    return list(latest_bars(line)) if "/" in line else []
