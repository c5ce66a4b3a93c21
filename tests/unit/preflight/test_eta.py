"""ETA in local time: day boundaries, DST changes, quiet windows, the wall cap, skips."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from producer.preflight.eta import check_eta
from producer.preflight.report import Verdict
from worker.quiet import QuietWindowError, parse_quiet_window, parse_quiet_windows

TOKYO = ZoneInfo("Asia/Tokyo")
NEW_YORK = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")

# (zone, start (local wall time), hours, expected end text, clock change expected?)
ENDS = [
    (
        TOKYO,
        datetime(2026, 5, 12, 9, 0),
        3,
        "ends Tue 2026-05-12 12:00 JST (Asia/Tokyo), today",
        False,
    ),
    (
        TOKYO,
        datetime(2026, 5, 12, 20, 0),
        6,
        "ends Wed 2026-05-13 02:00 JST (Asia/Tokyo), tomorrow",
        False,
    ),
    (
        TOKYO,
        datetime(2026, 12, 31, 22, 0),
        50,
        "ends Sun 2027-01-03 00:00 JST (Asia/Tokyo), in 3 days",
        False,
    ),
    # spring forward: 02:00 EST → 03:00 EDT, so 5 h after 23:00 EST is 05:00 EDT, not 04:00
    (
        NEW_YORK,
        datetime(2026, 3, 7, 23, 0),
        5,
        "ends Sun 2026-03-08 05:00 EDT (America/New_York), tomorrow",
        True,
    ),
    (
        NEW_YORK,
        datetime(2026, 3, 9, 23, 0),
        5,
        "ends Tue 2026-03-10 04:00 EDT (America/New_York), tomorrow",
        False,
    ),
    # fall back: 03:00 CEST → 02:00 CET, so 6 h after 22:00 CEST is 03:00 CET, not 04:00
    (
        BERLIN,
        datetime(2026, 10, 24, 22, 0),
        6,
        "ends Sun 2026-10-25 03:00 CET (Europe/Berlin), tomorrow",
        True,
    ),
    (
        BERLIN,
        datetime(2026, 10, 17, 22, 0),
        6,
        "ends Sun 2026-10-18 04:00 CEST (Europe/Berlin), tomorrow",
        False,
    ),
]


@pytest.mark.parametrize(("zone", "start", "hours", "end_text", "dst"), ENDS)
def test_end_time_in_local_zone(
    zone: ZoneInfo, start: datetime, hours: float, end_text: str, dst: bool
) -> None:
    finding = check_eta(
        epochs=hours, seconds_per_epoch=3600, now=start.replace(tzinfo=zone), zone=zone
    )
    assert finding.verdict is Verdict.PASS
    assert end_text in finding.saw
    assert ("crosses a clock change" in finding.saw) is dst


def test_clock_change_is_named_with_offsets() -> None:
    finding = check_eta(
        epochs=5,
        seconds_per_epoch=3600,
        now=datetime(2026, 3, 7, 23, tzinfo=NEW_YORK),
        zone=NEW_YORK,
    )
    assert "(EST UTC-05:00 → EDT UTC-04:00)" in finding.saw


def test_now_in_another_zone_is_converted() -> None:
    now = datetime(2026, 5, 12, 0, 0, tzinfo=ZoneInfo("UTC"))  # 09:00 in Tokyo
    finding = check_eta(epochs=2, seconds_per_epoch=1800, now=now, zone=TOKYO)
    assert "ends Tue 2026-05-12 10:00 JST (Asia/Tokyo)" in finding.saw
    assert "2 epochs x 1800 s (given) = 1.0 h" in finding.saw


WINDOWS = ["22:00-07:00", "Sat 00:00-24:00"]

# (start in Tokyo, hours, verdict, phrase)
QUIET = [
    (datetime(2026, 5, 12, 9, 0), 8, Verdict.PASS, "none"),  # Tue 09:00-17:00
    (datetime(2026, 5, 12, 9, 0), 14, Verdict.WARN, "defer the start to Wed 2026-05-13 07:00"),
    (datetime(2026, 5, 12, 14, 0), 8, Verdict.PASS, "none"),  # ends as the night begins
    (datetime(2026, 5, 12, 14, 0), 9, Verdict.WARN, "'22:00-07:00'"),
    (datetime(2026, 5, 15, 20, 0), 1, Verdict.PASS, "none"),  # Fri 20:00-21:00
    (datetime(2026, 5, 16, 10, 0), 1, Verdict.WARN, "'Sat 00:00-24:00'"),  # Saturday
    (datetime(2026, 5, 12, 7, 0), 15, Verdict.PASS, "none"),  # exactly fills 07:00-22:00
    (datetime(2026, 5, 12, 9, 0), 20, Verdict.WARN, "split it into resumed segments of ≤ 15.0 h"),
]


@pytest.mark.parametrize(("start", "hours", "verdict", "phrase"), QUIET)
def test_quiet_windows(start: datetime, hours: float, verdict: Verdict, phrase: str) -> None:
    finding = check_eta(
        epochs=hours,
        seconds_per_epoch=3600,
        now=start.replace(tzinfo=TOKYO),
        zone=TOKYO,
        quiet_windows=parse_quiet_windows(WINDOWS),
    )
    text = " | ".join((finding.saw, finding.next_action, *finding.details))
    assert finding.verdict is verdict, text
    assert phrase in text


def test_quiet_window_across_dst_uses_wall_clock() -> None:
    # The night window in New York on the spring-forward night is 22:00 EST → 07:00 EDT (8 h).
    finding = check_eta(
        epochs=1,
        seconds_per_epoch=3600,
        now=datetime(2026, 3, 8, 6, 30, tzinfo=NEW_YORK),
        zone=NEW_YORK,
        quiet_windows=parse_quiet_windows(["22:00-07:00"]),
    )
    assert finding.verdict is Verdict.WARN
    assert (
        "Sat 2026-03-07 22:00 EST (America/New_York) → Sun 2026-03-08 07:00 EDT"
        in (finding.details[0])
    )


# (hours, cap hours, epoch seconds, verdict, phrase)
CAPS = [
    (30, 12, 3600, Verdict.FAIL, "3 resumed segments of ≤ 12 epoch(s)"),
    (12, 12, 3600, Verdict.PASS, "none"),
    (10, 4, 1800, Verdict.FAIL, "3 resumed segments of ≤ 8 epoch(s)"),  # 20 epochs
    (10, 4, 5 * 3600, Verdict.FAIL, "one epoch (5.0 h) is longer than the cap"),
]


@pytest.mark.parametrize(("hours", "cap_h", "epoch_s", "verdict", "phrase"), CAPS)
def test_wall_cap(
    hours: float, cap_h: float, epoch_s: float, verdict: Verdict, phrase: str
) -> None:
    finding = check_eta(
        epochs=hours * 3600 / epoch_s,
        seconds_per_epoch=epoch_s,
        now=datetime(2026, 5, 12, 9, tzinfo=TOKYO),
        zone=TOKYO,
        wall_cap_s=cap_h * 3600,
    )
    assert finding.verdict is verdict
    assert phrase in finding.next_action


@pytest.mark.parametrize(
    ("epochs", "given", "measured", "verdict", "phrase"),
    [
        (None, 60.0, None, Verdict.SKIP, "epochs unknown"),
        (10, None, None, Verdict.SKIP, "no earlier run to measure it from"),
        (10, None, 360.0, Verdict.PASS, "360 s (measured from earlier runs) = 1.0 h"),
        (10, 60.0, 999.0, Verdict.PASS, "60 s (given)"),  # a given value wins
    ],
)
def test_unknown_inputs_skip_never_pass(
    epochs: float | None, given: float | None, measured: float | None, verdict: Verdict, phrase: str
) -> None:
    finding = check_eta(
        epochs=epochs,
        seconds_per_epoch=given,
        now=datetime(2026, 5, 12, 9, tzinfo=TOKYO),
        zone=TOKYO,
        measure_epoch_s=lambda: measured,
    )
    assert finding.verdict is verdict
    assert phrase in finding.saw


def test_failing_measurement_is_a_skip() -> None:
    def broken() -> float | None:
        raise OSError("ledger down")

    finding = check_eta(
        epochs=3,
        seconds_per_epoch=None,
        now=datetime(2026, 5, 12, tzinfo=TOKYO),
        zone=TOKYO,
        measure_epoch_s=broken,
    )
    assert finding.verdict is Verdict.SKIP and "ledger down" in finding.saw


def test_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        check_eta(epochs=1, seconds_per_epoch=1, now=datetime(2026, 5, 12), zone=TOKYO)


def test_default_zone_is_looked_up_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    import tzlocal

    monkeypatch.setattr(tzlocal, "get_localzone", lambda: TOKYO)
    finding = check_eta(epochs=1, seconds_per_epoch=3600, now=datetime(2026, 5, 12, tzinfo=TOKYO))
    assert "JST (Asia/Tokyo)" in finding.saw


# --- parsing quiet windows --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "days", "start_min", "end_min"),
    [
        ("22:00-07:00", set(range(7)), 22 * 60, 7 * 60),
        ("Sat 00:00-24:00", {5}, 0, 1440),
        ("Mon-Fri 12:00-13:30", {0, 1, 2, 3, 4}, 720, 810),
        ("Fri-Mon 9:00-10:00", {4, 5, 6, 0}, 540, 600),
        ("sat,Sunday 08:00-12:00", {5, 6}, 480, 720),
        ("weekends 00:00-24:00", {5, 6}, 0, 1440),
    ],
)
def test_parse_quiet_window(text: str, days: set[int], start_min: int, end_min: int) -> None:
    window = parse_quiet_window(text)
    assert (set(window.days), window.start_min, window.end_min) == (days, start_min, end_min)


@pytest.mark.parametrize(
    "text",
    ["", "22:00", "25:00-07:00", "10:61-11:00", "Funday 10:00-11:00", "09:00-09:00", "24:00-01:00"],
)
def test_bad_quiet_window_names_the_setting(text: str) -> None:
    with pytest.raises(QuietWindowError, match="quiet window"):
        parse_quiet_window(text)
