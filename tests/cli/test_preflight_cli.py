"""`colabq preflight`: the report, the copyable submit command, exit codes, `--json`."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from producer.cli import app
from producer.preflight.gate import (
    Checked,
    PreflightInputs,
    SubmitTarget,
    pairs,
    submit_command,
)
from producer.preflight.report import CHECK_NAMES, Report
from tests.cli.training_repo import GOOD_NAME, QUIET_ENV, RISKY, make_repo
from worker.errors import UserInputError

runner = CliRunner()
FENCE = re.compile(r"```bash\n(?P<command>.+)\n```")


def preflight(repo: Path, *args: str, env: dict[str, str | None] | None = None):  # type: ignore[no-untyped-def]
    argv = ["preflight", "--repo-dir", str(repo), "--name", GOOD_NAME, "--seconds-per-epoch", "600"]
    # Wide enough that Rich does not wrap the phrases the tests look for.
    return runner.invoke(app, [*argv, *args], env={**QUIET_ENV, "COLUMNS": "200", **(env or {})})


def test_clean_repo_exits_0_and_ends_with_the_submit_command(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    result = preflight(repo, "--local-store", "/srv/s")
    assert result.exit_code == 0, result.output
    for check in CHECK_NAMES:
        assert check in result.output
    match = FENCE.search(result.output)
    assert match is not None, result.output
    argv = shlex.split(match["command"])
    assert argv[:3] == ["colabq", "submit", str(repo / "train.sh")]
    assert argv[argv.index("--name") + 1] == GOOD_NAME
    # The picked config is not named: a named one must reach the VM, and no code is shipped.
    assert "--config" not in argv
    assert argv[argv.index("--local-store") + 1] == "/srv/s"
    assert argv[argv.index("--repo-dir") + 1] == str(repo)
    assert "Pre-flight clean" in result.output


def test_failing_repo_exits_2_without_a_command(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, RISKY)
    result = preflight(repo, "--config", "configs/detr/intended.yaml")
    assert result.exit_code == 2, result.output
    assert "```" not in result.output
    assert "Submission blocked by: config-diff" in result.output
    assert "linear scaling rule" in result.output


def test_json_has_the_five_checks_and_the_command_only_when_clean(tmp_path: Path) -> None:
    clean = preflight(make_repo(tmp_path / "a"), "--json")
    assert clean.exit_code == 0, clean.output
    data = json.loads(clean.stdout)
    assert [f["check"] for f in data["findings"]] == list(CHECK_NAMES)
    assert data["ok"] is True and re.fullmatch(r"[0-9a-f]{64}", data["digest"])
    assert data["submit_command"].startswith("colabq submit ")

    failing = preflight(make_repo(tmp_path / "b", RISKY), "--json")
    assert failing.exit_code == 2
    data = json.loads(failing.stdout)
    assert data["ok"] is False and data["submit_command"] is None
    verdicts = {f["check"]: f["verdict"] for f in data["findings"]}
    assert verdicts["config-diff"] == "fail"


def test_a_waived_failure_passes_and_the_command_carries_the_waiver(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, RISKY)
    result = preflight(repo, "--waive", "config-diff")
    assert result.exit_code == 0, result.output
    assert "FAIL (waived)" in result.output
    match = FENCE.search(result.output)
    assert match is not None and "--waive config-diff" in match["command"]


def test_no_config_named_picks_the_newest_and_says_so(tmp_path: Path) -> None:
    result = preflight(make_repo(tmp_path), "--json")
    data = json.loads(result.stdout)
    assert data["config"] == "configs/detr/intended.yaml"
    assert data["findings"][0]["saw"].startswith("no --config given; checked the newest config")


def test_no_config_at_all_fails_asking_for_one(tmp_path: Path) -> None:
    (tmp_path / "train.sh").write_text("python train.py\n")
    result = preflight(tmp_path, "--json")
    assert result.exit_code == 2
    diff = json.loads(result.stdout)["findings"][0]
    assert diff["verdict"] == "fail" and "--config PATH" in diff["next_action"]


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["--waive", "nope"], "--waive 'nope': no pre-flight check has that name"),
        (["--explain", "no-equals-sign"], "--explain 'no-equals-sign': expected KEY=REASON"),
        (["--hub-input", "data"], "--hub-input 'data': expected NAME=URI"),
        (["--wall", "forever"], "--wall"),
        (["--ttl", "forever"], "--ttl"),
        (["--epochs", "nan"], "--epochs nan: must be a finite number above 0"),
        (["--epochs", "inf"], "--epochs inf: must be a finite number above 0"),
        (["--epochs", "-1"], "--epochs -1: must be a finite number above 0"),
        (["--epochs", "0"], "--epochs 0: must be a finite number above 0"),
        (["--seconds-per-epoch", "inf"], "--seconds-per-epoch inf: must be a finite number"),
        (["--seconds-per-epoch", "nan"], "--seconds-per-epoch nan: must be a finite number"),
        (["--seconds-per-epoch", "-5"], "--seconds-per-epoch -5: must be a finite number"),
    ],
)
def test_bad_options_are_one_line_exit_2(tmp_path: Path, args: list[str], expect: str) -> None:
    result = preflight(make_repo(tmp_path), *args)
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("colabq: ") and expect in lines[0], lines


def test_bad_quiet_window_setting_is_one_line_exit_2(tmp_path: Path) -> None:
    result = preflight(make_repo(tmp_path), env={"COLABQ_QUIET_WINDOWS": "late evening"})
    assert result.exit_code == 2
    assert result.output.strip().startswith(
        "colabq: Invalid setting COLABQ_QUIET_WINDOWS: quiet window 'late evening'"
    )


def test_quiet_windows_from_the_environment_reach_the_eta_check(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    always = preflight(repo, "--json", env={"COLABQ_QUIET_WINDOWS": "daily 00:00-24:00"})
    never = preflight(repo, "--json")
    assert json.loads(always.stdout)["findings"][4]["verdict"] == "warn"
    assert "quiet window" in json.loads(always.stdout)["findings"][4]["saw"]
    assert json.loads(never.stdout)["findings"][4]["verdict"] == "pass"


def test_pairs_refuse_missing_and_repeated_keys() -> None:
    assert pairs("--explain", ["lr=new schedule", "seed=a=b"], "KEY=REASON") == {
        "lr": "new schedule",
        "seed": "a=b",
    }
    for bad in (["lr"], ["=x"], ["lr=a", "lr=b"], ["lr=a", " lr =b"]):
        with pytest.raises(UserInputError):
            pairs("--explain", bad, "KEY=REASON")


def test_submit_command_quotes_and_omits_defaults(tmp_path: Path) -> None:
    inputs = PreflightInputs(
        run_name=GOOD_NAME,
        repo=Path.cwd(),
        explain=("lr=new schedule; see 'notes'",),
        epochs=6,
        wall="12h",
        waive=("run-name", "config-diff", "run-name"),
    )
    checked = Checked(Report.build([]), config=Path("configs/x.yaml"), launch_script=None)
    command = submit_command(inputs, checked, SubmitTarget(gpu="a100", hub_repo="alice/runs"))
    argv = shlex.split(command)
    assert argv[2] == "JOB_SCRIPT.sh"  # no bash launch script known: the user names it
    assert "--wall" not in argv and "--repo-dir" not in argv
    assert argv[argv.index("--gpu") + 1] == "A100"
    assert argv[argv.index("--explain") + 1] == "lr=new schedule; see 'notes'"
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--waive"] == [
        "config-diff",
        "run-name",
    ]


def test_preflight_module_imports_no_celery_redis_or_hub() -> None:
    code = (
        "import sys, producer.commands.preflight, producer.preflight.gate, "
        "producer.commands.clean; "
        "print(sorted(m for m in ('celery', 'redis', 'huggingface_hub') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
