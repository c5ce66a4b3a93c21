"""A run's position from its lines (`track`), its rate and projected end (`rate`), the stored
reading (`record`: written by the attach client, checked when read back) and the attach client's
side (`feed`: chunks of framed items, bar updates dropped, a write every few seconds)."""

from __future__ import annotations

import json

import pytest

from worker.progress import record
from worker.progress.feed import Outbox, ProgressFeed
from worker.progress.rate import Estimator, Sample, eta_at
from worker.progress.record import Reading
from worker.progress.track import Position, Tracker


def position(lines: list[str], epochs: float | None = None) -> Position | None:
    t = Tracker(epochs)
    for line in lines:
        t.feed_line(line)
    return t.position()


UP = "\x1b[A"  # a nested bar's cursor-up after its update


def bar(n: int, total: int, desc: str = "", tail: str = "") -> str:
    head = f"{desc}: " if desc else ""
    return f"\r{head}{100 * n // total:3d}%|          | {n}/{total} [00:01<00:09, 9.9it/s]{tail}"


@pytest.mark.parametrize(
    ("lines", "epochs", "want"),
    [
        # Keras: the epoch line, then its step bar's fraction within that epoch.
        (["Epoch 3/10", " 12/100 [==>....] - ETA: 5s"], None, Position(2.12, 10, "epoch", "keras")),
        (["Epoch 3/10", " 100/100 [======] - 2s", "Epoch 4/10"], None,
         Position(3.0, 10, "epoch", "keras")),  # a bar from before the epoch line is the last's
        # Lightning: counted from 0 when the first bar says Epoch 0.
        ([bar(100, 100, "Epoch 0"), bar(45, 100, "Epoch 1")], 4.0,
         Position(1.45, 4.0, "epoch", "lightning")),
        ([bar(45, 100, "Epoch 2/9")], None, Position(1.45, 9.0, "epoch", "lightning")),
        ([bar(10, 100, "Epoch 0/9"), bar(45, 100, "Epoch 2/9")], None,
         Position(2.45, 10.0, "epoch", "lightning")),
        ([bar(45, 100, "Epoch 2")], None, Position(1.45, None, "epoch", "lightning")),
        # A whole-run bar (Hugging Face Trainer's) beats its log dicts.
        (["{'loss': 0.5, 'epoch': 1.25}", bar(450, 1000)], 3.0, Position(450, 1000, "it", "tqdm")),
        (["{'loss': 0.5, 'epoch': 1.25}"], 3.0, Position(1.25, 3.0, "epoch", "trainer")),
        # Nested bars: the outermost, refined by the inner one printed after it moved.
        ([bar(1, 3, "epochs"), bar(2, 4, "batches", UP)], None, Position(1.5, 3, "it", "tqdm")),
        ([bar(2, 4, "batches", UP), bar(1, 3, "epochs")], None, Position(1, 3, "it", "tqdm")),
        # An outer bar without a total (`5it [...]`) says no fraction: the one with a total does.
        (["\r5it [00:01, 4.90it/s]", bar(2, 4, "batches", UP)], None, Position(2, 4, "it", "tqdm")),
        # A bar that starts again each epoch: rounds, of the job's epochs when it has them.
        ([bar(100, 100), bar(100, 100), bar(30, 100)], 4.0, Position(230, 400, "it", "tqdm")),
        ([bar(100, 100), bar(30, 100)], None, Position(130, None, "it", "tqdm")),
        # A training bar and an evaluation bar taking turns: the larger is the run's.
        ([bar(60, 100), bar(5, 20), bar(70, 100), bar(10, 20)], None,
         Position(70, 100, "it", "tqdm")),
        # The job's own line wins over everything.
        ([bar(45, 100), "colabq-progress step=7 total=9", bar(50, 100)], None,
         Position(7, 9, "step", "colabq-progress")),
        (["nothing to see", "In Epoch 3 the loss fell"], None, None),
    ],
)  # fmt: skip
def test_positions(lines: list[str], epochs: float | None, want: Position | None) -> None:
    got = position(lines, epochs)
    if want is None:
        assert got is None
        return
    assert got is not None
    assert (round(got.done, 6), got.total, got.unit, got.source) == (
        want.done, want.total, want.unit, want.source,
    )  # fmt: skip


def test_what_a_later_client_goes_on_from() -> None:
    t = Tracker(4.0)
    for line in ["Epoch 2/5", bar(100, 100), bar(100, 100), bar(20, 100)]:
        t.feed_line(line)
    state = json.loads(json.dumps(t.state()))  # as stored
    later = Tracker(4.0, state)
    later.feed_line(" 50/100 [=====>....] - ETA: 1s")
    assert later.position() == Position(1.5, 5.0, "epoch", "keras")
    restarts = Tracker(4.0)
    for line in [bar(100, 100), bar(100, 100), bar(20, 100)]:
        restarts.feed_line(line)
    again = Tracker(4.0, json.loads(json.dumps(restarts.state())))
    again.feed_line(bar(40, 100))
    assert again.position() == Position(240, 400, "it", "tqdm")
    # What does not parse is left out, never trusted.
    forged = Tracker(None, {"base": 7, "header": [5, 2], "rounds": ["x", 1e30]})
    assert forged.state() == {}


def test_rate_of_a_steady_run_and_its_end() -> None:
    est = Estimator()
    for i in range(31):  # 2 steps a second, read 10 times a second
        est.add(1000.0 + i * 0.1, i * 0.2)
    got = est.rate()
    # (the first readings, within BURST_S of each other, count as one: the newest)
    assert got is not None and got.per_s == pytest.approx(2.0) and got.span_s == pytest.approx(2.8)
    assert est.last is not None
    assert eta_at(est.last, 100.0, got.per_s) == pytest.approx(1000.0 + 50.0)


def test_a_backlog_forwarded_at_once_is_no_burst_of_speed() -> None:
    est = Estimator(Sample(0.0, 0.0), Sample(100.0, 100.0))  # the stored reading, 1 step/s
    for k in range(20):  # 60 steps of backlog delivered within 0.2 s at t=160
        est.add(160.0 + k * 0.01, 100.0 + 3 * (k + 1))
    est.add(170.0, 170.0)  # then live again
    got = est.rate()
    assert got is not None and got.per_s == pytest.approx(1.0)


def test_a_count_that_goes_back_starts_a_new_measure() -> None:
    est = Estimator()
    for i in range(10):
        est.add(float(i), 10.0 * i)
    assert not est.add(10.0, 50.0)  # an older view for a moment: left out
    assert est.add(11.0, 0.0)  # back past its start: the run started over
    assert est.first == Sample(11.0, 0.0) and est.rate() is None


def reading(**kw: object) -> Reading:
    base: dict[str, object] = dict(at=1000.0, done=45.0, total=100.0, unit="it", source="tqdm",
                                   rate_per_s=4.9, span_s=30.0, first_at=900.0, first_done=0.0,
                                   state={"base": 1})  # fmt: skip
    return Reading(**{**base, **kw})  # type: ignore[arg-type]


def test_a_stored_reading_round_trips() -> None:
    r = reading()
    assert record.decode(record.encode(r)) == r
    assert r.fraction == 0.45 and r.eta_at == pytest.approx(1000 + 55 / 4.9)
    assert r.mean_rate_per_s == pytest.approx(0.45)


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "not json",
        "[]",
        json.dumps({"v": 2}),
        record.encode(reading(done=float("nan"))),
        record.encode(reading(total=0.0)),
        record.encode(reading(rate_per_s=-1.0)),
        record.encode(reading(unit="it; rm -rf /")),
        record.encode(reading(source="mine")),
        record.encode(reading(first_at=2000.0)),
        record.encode(reading(done=1e300)),
        "x" * 5000,
    ],
)
def test_a_damaged_reading_is_none(raw: str | None) -> None:
    assert record.decode(raw) is None


@pytest.mark.parametrize(
    ("started", "ttl", "ok"),
    [("1000.5", "3600", True), (None, "3600", False), ("1000", "0", False), ("x", "1", False),
     ("1000", "inf", False), ("-5", "10", False)],
)  # fmt: skip
def test_the_time_limit_from_the_wrappers_sentinels(started: str, ttl: str, ok: bool) -> None:
    got = record.limit_of(started, ttl)
    assert (got is not None) is ok
    if got is not None:
        assert got.at == float(started) + float(ttl)


NONCE = "n0"


def framed(items: list[tuple[str, str]], start: int = 0) -> tuple[str, list[tuple[str, ...]]]:
    """A chunk of the attach cell's output, and its rows as the attach client parses them."""
    rows, pos = [], start
    for kind, text in items:
        end = pos if kind == "p" else pos + len(text.encode()) + 1
        rows.append((str(pos), str(end), kind, text))
        pos = end
    return "\n".join(f"@{NONCE}:{a}:{b}:{k}:{t}" for a, b, k, t in rows), rows


def test_the_feed_reads_a_chunk_and_drops_bar_updates() -> None:
    now = [100.0]
    feed = ProgressFeed(NONCE, clock=lambda: now[0])
    chatter = [("l", f"line {i}") for i in range(1000)]
    text, rows = framed(chatter)
    assert feed.see(text, rows) == rows and feed.take() == ""  # nothing looked like progress
    text, rows = framed([("l", "start"), ("p", bar(5, 100)), ("l", "more")])
    kept = feed.see(text, rows)
    assert [r[2] for r in kept] == ["l", "l"]
    got = record.decode(feed.take())
    assert got is not None and (got.done, got.total, got.at) == (5, 100, 100.0)
    assert feed.take() == ""  # taken once
    now[0] = 110.0
    text, rows = framed([("p", bar(55, 100))])
    assert feed.see(text, rows) == []
    later = record.decode(feed.take())
    assert later is not None and later.rate_per_s == pytest.approx(5.0)
    assert later.eta_at == pytest.approx(110.0 + 45 / 5.0)
    # A chatter line of the CLI's own (no frame) that looks like progress is not the job's.
    text, rows = framed([("l", "x")])
    assert feed.see(text + "\ncolabq-progress step=1 total=2", rows) == rows and not feed.take()


def test_a_later_client_goes_on_from_the_stored_reading() -> None:
    stored = reading(at=100.0, done=50.0, first_at=0.0, first_done=0.0, rate_per_s=0.5,
                     state={})  # fmt: skip
    feed = ProgressFeed(NONCE, seed=stored, clock=lambda: 120.0)
    text, rows = framed([("p", bar(60, 100))])
    feed.see(text, rows)
    got = record.decode(feed.take())
    assert got is not None and got.rate_per_s == pytest.approx(0.5)
    assert (got.first_at, got.first_done) == (0.0, 0.0)


def test_the_outbox_writes_every_few_seconds_and_the_last_always() -> None:
    now = [0.0]
    box = Outbox(every_s=3.0, clock=lambda: now[0])
    assert box.wait_s() is None and box.take() == ""
    box.offer("a")
    assert box.take() == "a" and box.wait_s() is None
    now[0] = 1.0
    box.offer("b")
    assert box.take() == "" and box.wait_s() == pytest.approx(2.0)
    box.offer("c")
    assert box.take(last=True) == "c"
    now[0] = 3.5
    box.offer("d")
    assert box.take() == "" and box.wait_s() == pytest.approx(0.5)  # "c" went at 1 s
    now[0] = 4.0
    assert box.take() == "d"


def test_a_restarting_bar_seen_as_it_moves() -> None:
    t = Tracker(2.0)
    for n in (10, 60, 100):
        t.feed_line(bar(n, 100), ended=False)  # the attach cell's `p` items
    t.feed_line(bar(100, 100))  # its line ends, full
    for n in (5, 40):
        t.feed_line(bar(n, 100), ended=False)
    assert t.position() == Position(140, 200, "it", "tqdm")


def test_real_nested_tqdm_bars_give_the_outer_loop_refined_by_the_inner() -> None:
    import io

    from tqdm import tqdm

    out = io.StringIO()
    for _ in tqdm(range(3), desc="epochs", file=out, mininterval=0):
        for _ in tqdm(range(4), desc="batches", leave=False, file=out, mininterval=0):
            pass
    t, seen = Tracker(), []
    for line in out.getvalue().split("\n"):
        t.feed_line(line)
        p = t.position()
        if p is not None:
            seen.append(p.done)
    assert seen == sorted(seen)  # never back, whatever the inner bar does
    assert {1.25, 1.5, 1.75} <= set(seen) and seen[-1] == 3.0
    assert t.position() == Position(3, 3, "it", "tqdm")
