"""What one console line says about a run's progress (`worker.progress.parse`): a table per
format, each with lines it must read and lines it must not (prose that merely looks like it)."""

from __future__ import annotations

import io
import time

import pytest
from tqdm import tqdm

from worker.progress.parse import (
    Bar,
    Explicit,
    Found,
    Header,
    TrainerLog,
    latest_bars,
    parse_bar,
    parse_explicit,
    parse_header,
    parse_line,
    parse_trainer_log,
)

# tqdm's own bytes (tqdm 4.x, non-tty: `\r` before each update, the line ends at the bar's end).
TQDM_5 = "  5%|▌         | 5/100 [00:01<00:19,  4.9it/s]"
TQDM_LINE = (
    "\r  0%|          | 0/100 [00:00<?, ?it/s]"
    "\r  5%|▌         | 5/100 [00:01<00:19,  4.9it/s]"
    "\r 10%|█         | 10/100 [00:02<00:18,  4.95it/s]"
)


@pytest.mark.parametrize(
    ("segment", "want"),
    [
        (TQDM_5, Bar(5, 100)),
        ("100%|██████████| 100/100 [00:20<00:00,  4.98it/s]", Bar(100, 100)),
        ("train:  45%|████▌     | 45/100 [00:09<00:11,  4.90it/s, loss=0.31]", Bar(45, 100)),
        (" 12%|#2        | 1.20k/10.0k [00:03<00:22, 392img/s]", Bar(1200, 10000, "img")),
        (" 50%|█████     | 5/10 [00:50<00:50, 10.0s/batch]", Bar(5, 10, "batch")),
        # Lightning: the epoch is the bar's description.
        ("Epoch 2:  45%|████▌     | 45/100 [00:09<00:11,  4.90it/s, v_num=0]",
         Bar(45, 100, epoch=2)),
        ("Epoch 2/9:  45%|████▌     | 45/100 [00:09<00:11,  4.90it/s]",
         Bar(45, 100, epoch=2, epochs=9)),
        # A nested bar (position 1) moves the cursor back up after its update.
        ("batches:  25%|##5       | 1/4 [00:00<00:00, 41.9it/s]\x1b[A",
         Bar(1, 4, nested=True)),
        # Keras' step bar, 2 and 3 (ANSI colours as Keras 3 prints them).
        (" 12/100 [==>...........................] - ETA: 5s - loss: 0.1234",
         Bar(12, 100, "step", keras=True)),
        ("\x1b[1m12/100\x1b[0m \x1b[32m━━━━━━━\x1b[0m\x1b[37m━━━━━━━━━━━━━\x1b[0m \x1b[1m2s\x1b[0m "
         "20ms/step - loss: 0.3", Bar(12, 100, "step", keras=True)),
    ],
)  # fmt: skip
def test_bars_read(segment: str, want: Bar) -> None:
    assert parse_bar(segment) == want


@pytest.mark.parametrize(
    "segment",
    [
        "5it [00:01,  4.90it/s]",  # no total: no fraction
        "we are 45% done | 45/100",  # no `[` after the count
        "  5%|▌         | 5/10",  # an update cut mid-count: never a wrong total
        "accuracy 95%| improved",
        "2024/05/01 [INFO] loading 3/10 [shards]",  # not at the line's start: not Keras'
        " 12/Unknown [==>....] - ETA: 5s",  # Keras without a total
        "150%|██████████| 150/100 [00:20<00:00]",  # past its total: not a bar
        " 0%|          | 0/0 [00:00<?, ?it/s]",
    ],
)
def test_not_bars(segment: str) -> None:
    assert parse_bar(segment) is None


@pytest.mark.parametrize(
    ("line", "want"),
    [
        ("Epoch 3/10", Header(3, 10)),
        ("  Epoch 1/1  ", Header(1, 1)),
    ],
)
def test_keras_epoch_lines(line: str, want: Header) -> None:
    assert parse_header(line) == want


@pytest.mark.parametrize(
    "line",
    [
        "In Epoch 3 the loss fell",  # prose
        "Epoch 3/10 took 5 minutes",  # prose about an epoch
        "Epoch 11/10",
        "Epoch 0/10",  # Keras counts from 1
        "epoch 3/10",
        "Epoch 3 of 10",
    ],
)
def test_not_keras_epoch_lines(line: str) -> None:
    assert parse_header(line) is None


@pytest.mark.parametrize(
    ("line", "epoch"),
    [
        ("{'loss': 0.4523, 'grad_norm': 1.2, 'learning_rate': 4.5e-05, 'epoch': 1.25}", 1.25),
        ("{'eval_loss': 0.38, 'eval_runtime': 2.1, 'epoch': 2.0}", 2.0),
        ("{'train_runtime': 120.5, 'train_loss': 0.4, 'epoch': 3}", 3.0),
    ],
)
def test_trainer_logs(line: str, epoch: float) -> None:
    assert parse_trainer_log(line) == TrainerLog(epoch)


@pytest.mark.parametrize(
    "line",
    [
        "the 'epoch': 3 thing",  # not a dict
        "{'epoch': 'three'}",
        '{"loss": 0.4, "epoch": 1.25}',  # JSON, not the Trainer's dict
        "{'epoch': 1.25} and more",
        "{'loss': 0.45}",
    ],
)
def test_not_trainer_logs(line: str) -> None:
    assert parse_trainer_log(line) is None


@pytest.mark.parametrize(
    ("line", "want"),
    [
        ("colabq-progress step=5 total=100", Explicit(5, 100)),
        ("2026-05-01 12:00:01 INFO colabq-progress step=250 total=1000", Explicit(250, 1000)),
        ("colabq-progress step=0 total=3.5", Explicit(0, 3.5)),
    ],
)
def test_explicit_lines(line: str, want: Explicit) -> None:
    assert parse_explicit(line) == want


@pytest.mark.parametrize(
    "line",
    [
        "colabq-progress step=5",
        "colabq-progress step=101 total=100",
        "colabq-progress step=5 total=0",
        "colabq-progress step=-1 total=10",
        "colabq-progress step=5 total=100x",
        "mycolabq-progress step=5 total=100",
        "colabq-progress total=100 step=5",
    ],
)
def test_not_explicit_lines(line: str) -> None:
    assert parse_explicit(line) is None


@pytest.mark.parametrize(
    ("line", "want"),
    [
        (TQDM_LINE, [Bar(10, 100)]),  # the latest update of a bar's line
        (TQDM_LINE + "\r" + " " * 50, [Bar(10, 100)]),  # a bar cleared at its end (leave=False)
        ("Epoch 3/10", [Header(3, 10)]),
        # A nested bar cleared, then the outer one: both, in the order printed.
        ("\rbatches: 100%|####| 4/4 [00:00<00:00, 41.1it/s]\x1b[A\repochs:  33%|###3 | 1/3 "
         "[00:00<00:00,  5.2it/s]", [Bar(4, 4, nested=True), Bar(1, 3)]),
        ("colabq-progress step=7 total=9 \r 10%|█ | 10/100 [00:01<00:09, 9.9it/s]",
         [Explicit(7, 9)]),
        ("just a log line with 3/4 of the data", []),
    ],
)  # fmt: skip
def test_lines(line: str, want: list[Found]) -> None:
    assert parse_line(line) == want


def test_a_bar_that_ran_for_hours_is_read_from_its_end() -> None:
    """Millions of updates in one line: only the last few are looked at (O(line), not more)."""
    line = "".join(f"\r{i // 1000:3d}%|          | {i}/100000 [00:00<00:00, 9it/s]"
                   for i in range(0, 100_000, 7))  # fmt: skip
    started = time.perf_counter()
    got = latest_bars(line)
    assert time.perf_counter() - started < 0.05
    assert got == [Bar(99995, 100000)]


def test_the_real_tqdm_package_output_is_read() -> None:
    out = io.StringIO()
    for _ in tqdm(range(40), file=out, mininterval=0, desc="Epoch 1"):
        pass
    text = out.getvalue()
    assert text.startswith("\rEpoch 1:") and text.count("\r") > 40
    assert parse_line(text.rstrip("\n")) == [Bar(40, 40, epoch=1)]
