"""run_preflight end to end on a temporary repository, and the Rich rendering of its report."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from producer.preflight import PreflightOptions, RemoteState, RemoteStatus, Verdict, run_preflight
from producer.preflight.remote import SchemeRemoteChecker
from producer.preflight.render import fenced, format_report
from producer.preflight.report import UnknownCheck
from worker.errors import ConfigError

NOW = datetime(2026, 5, 12, 0, 0, tzinfo=UTC)  # 09:00 in Tokyo
TOKYO = ZoneInfo("Asia/Tokyo")
ENV = {"WANDB_API_KEY": "sk-do-not-print", "WANDB_PROJECT": "coco", "WANDB_RUN_GROUP": "bs"}
SUBMIT = "colabq submit train.sh --name coco-detr-r50-bs64-lr1e-4 --gpu A100"

REFERENCE = """\
model:
  name: detr
seed: 7
batch_size: 64
optimizer:
  lr: 1.0e-4
data:
  train_dir: data/train
output_dir: runs/detr
epochs: 3
"""


def _repo(tmp_path: Path, intended: str) -> Path:
    (tmp_path / "configs" / "detr").mkdir(parents=True)
    (tmp_path / "data" / "train").mkdir(parents=True)
    (tmp_path / "runs").mkdir()
    ref = tmp_path / "configs" / "detr" / "baseline.yaml"
    ref.write_text(REFERENCE)
    stamp = (NOW - timedelta(days=2)).timestamp()
    os.utime(ref, (stamp, stamp))
    (tmp_path / "configs" / "detr" / "intended.yaml").write_text(intended)
    (tmp_path / "train.sh").write_text("python train.py\n")
    (tmp_path / "train.py").write_text("import wandb\n")
    return tmp_path


def _options(repo: Path, **overrides: object) -> PreflightOptions:
    values: dict[str, object] = {
        "repo": repo,
        "config": Path("configs/detr/intended.yaml"),
        "run_name": "coco-detr-r50-bs64-lr1e-4",
        "seconds_per_epoch": 1200.0,
        "wall_cap_s": 12 * 3600.0,
        "quiet_windows": ("22:00-07:00",),
        "zone": TOKYO,
    }
    values.update(overrides)
    return PreflightOptions(**values)  # type: ignore[arg-type]


def _run(opts: PreflightOptions, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    checker = SchemeRemoteChecker({"hf": lambda uri: RemoteStatus(RemoteState.EXISTS, "ok")})
    return run_preflight(opts, now=NOW, env=ENV if env is None else env, remote_checker=checker)


def test_clean_repository_passes_and_ends_with_the_submit_command(tmp_path: Path) -> None:
    report = _run(_options(_repo(tmp_path, REFERENCE.replace("runs/detr", "runs/detr-2"))))
    verdicts = {f.check.value: f.verdict for f in report.findings}
    assert verdicts == {
        "config-diff": Verdict.WARN,  # output_dir changed, unexplained
        "run-name": Verdict.PASS,
        "paths": Verdict.PASS,
        "monitoring": Verdict.PASS,
        "eta": Verdict.PASS,
    }
    assert report.ok
    assert "3 epochs x 1200 s (given) = 1.0 h: ends Tue 2026-05-12 10:00 JST (Asia/Tokyo)" in (
        report.finding("eta").saw
    )
    text = format_report(report, submit_command=SUBMIT)
    for column in ("Check", "Verdict", "What it saw", "Next action", "config-diff", "WARN"):
        assert column in text
    assert f"```bash\n{SUBMIT}\n```" in text
    assert "sk-do-not-print" not in text and "sk-do-not-print" not in report.to_json()


def test_failing_report_is_blocked_and_shows_no_command(tmp_path: Path) -> None:
    intended = REFERENCE.replace("batch_size: 64", "batch_size: 128").replace("seed: 7\n", "")
    report = _run(_options(_repo(tmp_path, intended), run_name="wave-2"))
    assert not report.ok
    assert report.failed_checks == ("config-diff", "run-name")
    text = format_report(report, submit_command=SUBMIT)
    assert "```" not in text
    assert "Submission blocked by: config-diff, run-name." in text
    assert "linear scaling rule gives lr = 0.0002" in text


def test_waivers_unblock_and_are_recorded(tmp_path: Path) -> None:
    opts = _options(_repo(tmp_path, REFERENCE), run_name="wave-2", waive=frozenset({"run-name"}))
    report = _run(opts)
    assert report.ok
    assert report.waived_failures == ("run-name",)
    assert json.loads(report.to_json())["waived"] == ["run-name"]
    text = format_report(report, submit_command=SUBMIT)
    assert "FAIL (waived)" in text and SUBMIT in text


def test_bad_options_are_refused_up_front(tmp_path: Path) -> None:
    with pytest.raises(UnknownCheck):
        _options(tmp_path, waive=frozenset({"paths", "nope"}))
    with pytest.raises(ConfigError, match="quiet window"):
        _options(tmp_path, quiet_windows=("late",))


def test_broken_config_is_a_fail_naming_the_line_not_a_traceback(tmp_path: Path) -> None:
    report = _run(_options(_repo(tmp_path, "seed: 7\nmodel: [detr\n")))
    finding = report.finding("config-diff")
    assert finding.verdict is Verdict.FAIL
    assert "intended.yaml:3:" in finding.saw
    assert report.finding("paths").verdict is Verdict.SKIP
    assert report.finding("eta").verdict is Verdict.SKIP  # epochs came from the config


def test_no_tracker_and_missing_path(tmp_path: Path) -> None:
    repo = _repo(tmp_path, REFERENCE.replace("data/train", "data/val"))
    (repo / "train.py").write_text("print('no tracker')\n")
    (repo / "runs").rmdir()  # a runs/ folder alone would count as tensorboard
    report = _run(_options(repo), env={})
    assert report.finding("monitoring").verdict is Verdict.FAIL
    assert report.finding("paths").verdict is Verdict.FAIL
    assert "data.train_dir" in report.finding("paths").next_action


def test_explicit_reference_and_explanations(tmp_path: Path) -> None:
    repo = _repo(tmp_path, REFERENCE.replace("epochs: 3", "epochs: 6"))
    (repo / "other.json").write_text(json.dumps({"seed": 7, "epochs": 3}))
    report = _run(
        _options(repo, reference=Path("other.json"), explain={"epochs": "longer schedule"})
    )
    finding = report.finding("config-diff")
    assert "other.json (named with --reference)" in finding.saw
    assert any("why: longer schedule" in d for d in finding.details)


def test_digest_is_reproducible(tmp_path: Path) -> None:
    opts = _options(_repo(tmp_path, REFERENCE))
    assert _run(opts).digest == _run(opts).digest


def test_fence_outgrows_backticks_in_the_command() -> None:
    assert fenced("echo `date`") == "```bash\necho `date`\n```"
    assert fenced("echo ```x```").startswith("````bash\n")
