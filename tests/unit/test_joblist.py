"""The pure parts of `colabq status`: short ids, `--state` and `--since`, rows from summary
fields (and damaged ones), the filters, and the final report's duration and compute units."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from rich.console import Console

from producer import render
from producer.joblist import (
    GROUPS,
    MIN_ID_CHARS,
    Filters,
    JobRow,
    make_row,
    parse_since,
    parse_states,
    short_ids,
    whoami,
)
from worker.errors import UserInputError
from worker.states import TERMINAL, JobState

GOOD = {
    "state": "running", "run_name": "coco-r50", "gpu": "A100", "user": "ann@box",
    "worker": "celery@gpu1", "created_at": "1000.0", "updated_at": "1100.0", "held_s": "60",
    "held_since": "1500",
}  # fmt: skip


@pytest.mark.parametrize(
    ("known", "shown", "expected"),
    [
        (["a1b2c3d4e5f6"], ["a1b2c3d4e5f6"], "a1b2c3"),
        (["a1b2c3d4e5f6", "a1b2c3d4ffff"], ["a1b2c3d4e5f6"], "a1b2c3d4e"),
        (["a1b2c3d4e5f6", "a1b2c3000000", "a1b2c3d4e000"], ["a1b2c3d4e5f6"], "a1b2c3d4e5"),
        (["abcdef12", "abcdef"], ["abcdef"], "abcdef"),  # an id that prefixes another: whole
        ([], ["0123456789"], "012345"),  # unknown to the index: still at least 6
    ],
)
def test_short_ids_are_the_shortest_unique_prefix(
    known: list[str], shown: list[str], expected: str
) -> None:
    short = short_ids(known, shown)[shown[0]]
    assert short == expected and len(short) >= min(MIN_ID_CHARS, len(shown[0]))
    others = [k for k in known if k != shown[0]]
    assert not any(k.startswith(short) for k in others if len(short) < len(shown[0]))


def test_state_names_and_groups_in_any_case() -> None:
    assert parse_states(["RUNNING", "queued"]) == {"running", "queued"}
    assert (
        parse_states(["Live"])
        == GROUPS["live"]
        == {s.value for s in JobState} - {s.value for s in TERMINAL}
    )
    failed = parse_states(["failed"])
    assert failed is not None and "succeeded" not in failed and "cancelled" not in failed
    assert {"failed", "timed_out", "vm_lost", "failed_no_gpu"} <= failed
    assert parse_states(["ended"]) == {s.value for s in TERMINAL}
    assert parse_states(["damaged"]) == {"damaged"}
    assert parse_states([]) is None


def test_an_unknown_state_is_one_line_naming_the_accepted_ones() -> None:
    with pytest.raises(UserInputError) as info:
        parse_states(["runing"])
    assert "'runing'" in str(info.value) and "RUNNING" in str(info.value)
    assert "\n" not in str(info.value)


def test_since_takes_a_duration_or_a_date() -> None:
    now = 1_800_000_000.0
    assert parse_since("2h", now) == now - 7200
    assert parse_since("3d", now) == now - 3 * 86400
    assert parse_since("2026-05-01", now) == datetime(2026, 5, 1).timestamp()
    assert parse_since("2026-05-01T14:00+00:00", now) == 1777644000.0
    for bad in ("yesterday", "2h ago", "-2h", ""):
        with pytest.raises(UserInputError):
            parse_since(bad, now)


def test_a_good_row_from_summary_fields() -> None:
    row = make_row("j1", GOOD)
    assert row.state is JobState.RUNNING and not row.problem
    assert (row.run, row.gpu, row.user) == ("coco-r50", "A100", "ann@box")
    assert row.worker == "celery@gpu1"
    assert row.elapsed_s(2000.0) == 1000.0  # live: submission to now
    assert row.held_s(2000.0) == 60 + 500
    assert row.cu(2000.0) == pytest.approx(11.77 * 560 / 3600)


def test_an_ended_rows_elapsed_stops_at_its_end() -> None:
    row = make_row("j1", {**GOOD, "state": "succeeded", "held_since": None})
    assert row.elapsed_s(99_999.0) == 100.0 and row.held_s(99_999.0) == 60


def test_an_old_record_reads_its_spec_for_the_summary() -> None:
    old = {**GOOD, "run_name": None, "gpu": None, "user": None}
    spec = json.dumps({"run_name": "old-run", "gpu": "T4", "submitted_by": "bo@h"}).encode()
    row = make_row("j1", old, spec)
    assert (row.run, row.gpu, row.user, row.problem) == ("old-run", "T4", "bo@h", "")


@pytest.mark.parametrize(
    ("fields", "spec", "problem"),
    [
        ({"state": "bogus"}, None, "state 'bogus' unknown"),
        ({"state": None}, None, "no state"),
        ({"created_at": "yesterday"}, None, "created_at"),
        ({"updated_at": None}, None, "updated_at"),
        ({"held_s": "lots"}, None, "held time"),
        ({"gpu": None}, None, "no gpu"),
        ({"run_name": None}, b"{not json", "spec unreadable"),
        ({"run_name": None}, b'{"gpu": "T4"}', "spec unreadable"),
        ({"run_name": None}, None, "no spec"),
    ],
)
def test_what_cannot_be_read_makes_the_row_damaged_with_the_rest_shown(
    fields: dict[str, str | None], spec: bytes | None, problem: str
) -> None:
    row = make_row("j1", {**GOOD, **fields}, spec)
    assert row.state is None and row.state_value == "damaged"
    assert problem in row.problem
    assert row.gpu == (fields.get("gpu", "A100") or "?")  # what is known is kept


def _row(**fields: str | None) -> JobRow:
    return make_row("j1", {**GOOD, **fields})


@pytest.mark.parametrize(
    ("filters", "row", "kept"),
    [
        (Filters(), _row(), True),
        (Filters(states=frozenset({"running"})), _row(), True),
        (Filters(states=frozenset({"queued"})), _row(), False),
        (Filters(states=frozenset({"damaged"})), _row(state="x"), True),
        (Filters(states=GROUPS["live"]), _row(state="x"), False),
        (Filters(run_glob="coco-*"), _row(), True),
        (Filters(run_glob="COCO-*"), _row(), False),  # case matters, as in run names
        (Filters(run_glob="detr*"), _row(), False),
        (Filters(user="ann@box"), _row(), True),
        (Filters(user="bo@box"), _row(), False),
    ],
)
def test_filters(filters: Filters, row: JobRow, kept: bool) -> None:
    assert filters.keep(row) is kept


@pytest.mark.parametrize(
    ("states", "live_only"),
    [
        (frozenset({"running"}), True),
        (GROUPS["live"], True),
        (frozenset({"running", "failed"}), False),
        (GROUPS["ended"], False),
        (frozenset({"damaged"}), False),  # a damaged record's state is not to be trusted
        (None, False),
    ],
)
def test_only_filters_on_live_states_read_the_live_index(
    states: frozenset[str] | None, live_only: bool
) -> None:
    assert Filters(states=states).live_only is live_only


def test_whoami_is_who_submit_records(tmp_path: Path) -> None:
    from producer.submit import SubmitRequest, build_spec

    script = tmp_path / "train.sh"
    script.write_text("echo hi\n")
    req = SubmitRequest(script=script, run_name="coco-r50-bs64", local_store=tmp_path / "s")
    assert build_spec(req).submitted_by == whoami() and "@" in whoami()


def _text(renderable: object, width: int = 120) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_the_final_report_shows_duration_and_compute_units_with_the_rate() -> None:
    report = {
        "outcome": "succeeded",
        "duration": {"total_s": 4000.0, "held_s": 3600.0},
        "compute_units": {"units": 11.77, "gpu": "A100", "rate_per_hour": 11.77},
    }
    text = _text(render.final_report(report))
    assert "1h06m40s" not in text  # durations are compact
    assert "1h06m from submission to end; GPU held 1h00m" in text
    assert "11.770 (A100 at 11.77 units/h of GPU held)" in text


def test_an_older_report_without_them_shows_dashes() -> None:
    lines = _text(render.final_report({"outcome": "failed"})).splitlines()
    for key in ("duration", "compute units"):
        assert any(key in line and line.rstrip(" │").endswith("-") for line in lines), key
