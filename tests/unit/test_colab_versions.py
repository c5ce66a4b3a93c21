"""The `colab` releases colabq drives (`worker.colab.versions`): which are accepted, the one line
that refuses the others, the unlisted one an operator may name, and the worst case of `new` that
colabq's own timeout outlasts; the retry lines read from the CLI's log (`parse.find_retries`)."""

from __future__ import annotations

import pytest

from worker.colab.parse import find_retries
from worker.colab.versions import (
    RELEASES,
    SUPPORTED,
    AssignPolicy,
    check_release,
    recorded_version,
    report_notes,
)
from worker.errors import ColabVersionMismatch, ConfigError
from worker.settings import load_settings


def test_the_table_lists_each_release_with_what_differs_and_how_it_is_handled() -> None:
    assert SUPPORTED == ("0.7.4", "0.7.5")
    for release in RELEASES:
        assert release.differs and release.handled
    assert [r.retries_assignment for r in RELEASES] == [False, True]


@pytest.mark.parametrize("version", ["0.7.4", "0.7.5"])
def test_a_supported_release_is_accepted_without_a_warning(version: str) -> None:
    found = check_release(version)
    assert (found.version, found.unlisted, found.warning()) == (version, False, None)
    assert found.describe() == f"colab CLI {version} (supported: 0.7.4 and 0.7.5)"
    assert report_notes(version) == []


@pytest.mark.parametrize("version", ["0.7.3", "0.8.0", "0.7.5.1", "1.0.0"])
def test_any_other_is_refused_in_one_line_naming_the_supported_and_the_newest_install(
    version: str,
) -> None:
    with pytest.raises(ColabVersionMismatch) as caught:
        check_release(version)
    line = caught.value.advice()
    assert "\n" not in line
    assert line == (
        f"colab CLI {version} is not supported: colabq drives 0.7.4 and 0.7.5; install the "
        "newest with `uv tool install google-colab-cli==0.7.5` (or set "
        f"COLABQ_COLAB_UNLISTED_VERSION={version} to try this one at your own risk)"
    )


def test_the_unlisted_version_an_operator_names_runs_as_the_newest_with_a_warning() -> None:
    with pytest.raises(ColabVersionMismatch):
        check_release("0.8.0", unlisted_ok="0.8.1")  # only the exact one named
    found = check_release("0.8.0", unlisted_ok="0.8.0")
    assert found.unlisted and found.release.version == "0.7.5"
    assert "0.8.0 is not a release colabq supports (0.7.4 and 0.7.5)" in str(found.warning())
    assert "COLABQ_COLAB_UNLISTED_VERSION=0.8.0" in str(found.warning())
    [note] = report_notes("0.8.0")
    assert note.startswith("WARNING: colab CLI 0.8.0 is not a release colabq supports")


@pytest.mark.parametrize(
    ("value", "read"),
    [("0.7.5", "0.7.5"), ("0.8.0rc1", "0.8.0rc1"), ("", None), (None, None), (7, None),
     ("0.7.5; rm -rf /", None), ("x" * 40, None)],
)  # fmt: skip
def test_a_version_read_back_from_a_record_is_checked(value: object, read: str | None) -> None:
    assert recorded_version(value) == read


def test_the_unlisted_setting_must_be_a_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLABQ_COLAB_UNLISTED_VERSION", " 0.8.0 ")
    assert load_settings().colab_unlisted_version == "0.8.0"
    monkeypatch.setenv("COLABQ_COLAB_UNLISTED_VERSION", "")
    assert load_settings().colab_unlisted_version is None
    monkeypatch.setenv("COLABQ_COLAB_UNLISTED_VERSION", "latest")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "COLABQ_COLAB_UNLISTED_VERSION" in str(caught.value)


def test_colabq_sets_the_clis_variables_from_its_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().assign_policy().cli_env() == {
        "COLAB_CLI_REQUEST_TIMEOUT": "120",
        "COLAB_CLI_ASSIGN_RETRIES": "3",
        "COLAB_CLI_RETRY_BACKOFF": "10",
    }
    monkeypatch.setenv("COLABQ_COLAB_REQUEST_TIMEOUT_S", "2.5")
    monkeypatch.setenv("COLABQ_COLAB_ASSIGN_RETRIES", "0")
    monkeypatch.setenv("COLABQ_COLAB_RETRY_BACKOFF_S", "0.5")
    assert load_settings().assign_policy().cli_env() == {
        "COLAB_CLI_REQUEST_TIMEOUT": "2.5",
        "COLAB_CLI_ASSIGN_RETRIES": "0",
        "COLAB_CLI_RETRY_BACKOFF": "0.5",
    }


@pytest.mark.parametrize(
    ("policy", "worst_075"),
    [
        # The CLI's defaults: refresh, GET, 4 POSTs, 3 GETs at 120 s; 10 + 20 + 40 s of backoff.
        (AssignPolicy(120.0, 3, 10.0), 9 * 120.0 + 70.0),
        (AssignPolicy(60.0, 1, 10.0), 5 * 60.0 + 10.0),
        (AssignPolicy(1.0, 0, 0.0), 3.0),  # one POST, no retry
    ],
)
def test_colabqs_timeout_on_new_outlasts_the_clis_worst_case(
    policy: AssignPolicy, worst_075: float
) -> None:
    old, new = RELEASES
    assert policy.new_worst_case_s(new) == worst_075
    assert policy.new_worst_case_s(old) == 3 * 120.0  # 0.7.4 reads no variable
    assert policy.new_worst_case_s(None) == max(worst_075, 360.0)  # not known yet: the longest
    for release in (old, new, None):
        assert policy.new_timeout_s(release, 30.0) > policy.new_worst_case_s(release)


def test_retry_lines_are_read_in_the_clis_logging_format_and_nothing_else() -> None:
    log = (
        "2026-12-04 10:00:01,123 - colab_cli.client - DEBUG - Request: POST https://colab...\n"
        "2026-12-04 10:00:02,456 - colab_cli.client - WARNING - Assignment request failed; "
        "retrying in 10s\n"
        "2026-12-04 10:00:02,456 - root - WARNING - Assignment request failed; retrying in 10s\n"
        "Assignment request failed; retrying in 10s\n"
        "2026-12-04 10:00:12,789 - colab_cli.client - WARNING - Assignment request failed; "
        "retrying in 20s\r\n"
    )
    assert find_retries(log) == [
        "Assignment request failed; retrying in 10s (at 2026-12-04 10:00:02)",
        "Assignment request failed; retrying in 20s (at 2026-12-04 10:00:12)",
    ]
