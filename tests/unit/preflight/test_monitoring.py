"""Monitoring: the four trackers and "none", found from env, launch code, folders and config."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from producer.preflight.launch_scan import scan_launch_script
from producer.preflight.monitoring import check_monitoring
from producer.preflight.report import Verdict


@dataclass(frozen=True)
class Case:
    id: str
    files: dict[str, str]  # repo-relative path → text ("" with a trailing / makes a folder)
    env: dict[str, str]
    launch: str | None
    verdict: Verdict
    must: tuple[str, ...] = ()
    must_not: tuple[str, ...] = ()
    config: dict[str, object] = field(default_factory=dict)


CASES = [
    Case(
        "none",
        {"train.py": "import torch\nprint('hi')\n"},
        {},
        "train.py",
        Verdict.FAIL,
        must=("no monitoring",),
    ),
    Case(
        "wandb-env-only",
        {},
        {"WANDB_API_KEY": "sk-secret-123", "WANDB_PROJECT": "coco"},
        None,
        Verdict.PASS,
        must=("wandb", "project coco (env WANDB_PROJECT)", "WANDB_API_KEY set"),
        must_not=("sk-secret-123",),
    ),
    Case(
        "wandb-import-no-project",
        {"train.py": "import wandb\nwandb.init()\n"},
        {},
        "train.py",
        Verdict.WARN,
        must=("wandb", "set the wandb project"),
    ),
    Case(
        "wandb-init-kwargs",
        {
            "train.py": "import wandb as wb\nwb.init(project='det', "
            "entity='lab', group='bs-sweep', tags=['a', 'b'])\n"
        },
        {},
        "train.py",
        Verdict.PASS,
        must=("project det (wandb.init in train.py)", "entity lab", "group bs-sweep", "tags a,b"),
    ),
    Case(
        "wandb-via-bash-python-m",
        {
            "train.sh": "#!/bin/bash\nset -e\nexport WANDB_PROJECT=seg\nCUDA_VISIBLE_DEVICES=0 "
            "python -m pkg.train --lr 3e-4\n",
            "pkg/__init__.py": "",
            "pkg/train.py": "from wandb import init\n",
        },
        {},
        "train.sh",
        Verdict.PASS,
        must=("project seg (env WANDB_PROJECT)", "imports wandb"),
    ),
    Case(
        "wandb-via-accelerate",
        {
            "launch.sh": "accelerate launch --num_processes 2 \\\n  scripts/train.py --bs 64\n",
            "scripts/train.py": "import wandb\n",
        },
        {"WANDB_PROJECT": "p"},
        "launch.sh",
        Verdict.PASS,
        must=("imports wandb",),
    ),
    Case(
        "wandb-via-torchrun-and-local-import",
        {
            "run.sh": "torchrun --nproc_per_node=8 train.py && echo done\n",
            "train.py": "from utils.logging import setup\n",
            "utils/__init__.py": "",
            "utils/logging.py": "import wandb\n",
        },
        {"WANDB_PROJECT": "p"},
        "run.sh",
        Verdict.PASS,
        must=("imports wandb",),
    ),
    Case(
        "wandb-via-uv-run-report-to",
        {
            "go.sh": "uv run train.py\n",
            "train.py": "from transformers import TrainingArguments\n"
            "args = TrainingArguments(output_dir='o', report_to=['wandb'])\n",
        },
        {"WANDB_PROJECT": "p"},
        "go.sh",
        Verdict.PASS,
        must=("report_to/log_with = 'wandb'",),
    ),
    Case(
        "neptune-env",
        {},
        {"NEPTUNE_API_TOKEN": "tok-999", "NEPTUNE_PROJECT": "ws/proj"},
        None,
        Verdict.PASS,
        must=("neptune", "project ws/proj", "NEPTUNE_API_TOKEN set"),
        must_not=("tok-999",),
    ),
    Case(
        "mlflow-env-redacted",
        {},
        {
            "MLFLOW_TRACKING_URI": "https://bob:hunter2@ml.example/",
            "MLFLOW_EXPERIMENT_NAME": "coco",
        },
        None,
        Verdict.PASS,
        must=("mlflow", "experiment coco", "https://***@ml.example/"),
        must_not=("hunter2",),
    ),
    Case(
        "mlflow-import-set-experiment",
        {
            "train.py": "import mlflow\n"
            "mlflow.set_experiment('imagenet')\nmlflow.set_tags({'a': 1})\n"
        },
        {},
        "train.py",
        Verdict.PASS,
        must=("experiment imagenet (mlflow.set_experiment in train.py)",),
    ),
    Case(
        "mlflow-import-no-experiment",
        {"train.py": "import mlflow\n"},
        {},
        "train.py",
        Verdict.WARN,
        must=("set the mlflow experiment",),
    ),
    Case(
        "tensorboard-runs-folder",
        {"runs/": ""},
        {},
        None,
        Verdict.PASS,
        must=("tensorboard", "runs/ folder in the repo"),
    ),
    Case(
        "tensorboard-lightning-logs",
        {"lightning_logs/": ""},
        {},
        None,
        Verdict.PASS,
        must=("lightning_logs/ folder",),
    ),
    Case(
        "tensorboard-summarywriter",
        {
            "train.py": "from torch.utils.tensorboard import "
            "SummaryWriter\nw = SummaryWriter('logs/x')\n"
        },
        {},
        "train.py",
        Verdict.PASS,
        must=("tensorboard", "log dir logs/x"),
    ),
    Case(
        "wandb-from-config",
        {},
        {"WANDB_API_KEY": "k"},
        None,
        Verdict.PASS,
        must=("project from-config (config)", "group g1 (config)"),
        config={"logging.wandb.project": "from-config", "logging.wandb.group": "g1"},
    ),
    Case(
        "secret-set-in-launch-script",
        {
            "train.sh": "export WANDB_API_KEY=abc123\nexport WANDB_PROJECT=p\npython train.py\n",
            "train.py": "import wandb\n",
        },
        {},
        "train.sh",
        Verdict.WARN,
        must=("sets WANDB_API_KEY itself", "remove WANDB_API_KEY"),
        must_not=("abc123",),
    ),
    Case(
        "other-tracker-config-key-ignored",
        {"train.py": "import wandb\n"},
        {},
        "train.py",
        Verdict.WARN,
        config={"mlflow.project": "not-wandb"},
        must_not=("not-wandb",),
    ),
]


def _repo(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        if rel.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_monitoring(tmp_path: Path, case: Case) -> None:
    repo = _repo(tmp_path, case.files)
    scan = scan_launch_script(repo / case.launch, repo) if case.launch else None
    env = {**case.env, **(scan.env if scan else {})}
    finding = check_monitoring(env=env, scan=scan, repo=repo, config_flat=case.config)
    text = " | ".join((finding.saw, finding.next_action, *finding.details))
    assert finding.verdict is case.verdict, text
    for phrase in case.must:
        assert phrase in text
    for phrase in case.must_not:
        assert phrase not in text


def test_missing_tags_and_group_are_suggested(tmp_path: Path) -> None:
    finding = check_monitoring(
        env={"WANDB_API_KEY": "k", "WANDB_PROJECT": "p"}, scan=None, repo=tmp_path, config_flat={}
    )
    assert finding.verdict is Verdict.PASS
    assert "set tags or a group for cohort comparison (wandb)" in finding.next_action
    tagged = check_monitoring(
        env={"WANDB_API_KEY": "k", "WANDB_PROJECT": "p", "WANDB_RUN_GROUP": "g"},
        scan=None,
        repo=tmp_path,
        config_flat={},
    )
    assert tagged.next_action == "none"


def test_scan_follows_bash_to_python_and_collects_exports(tmp_path: Path) -> None:
    repo = _repo(
        tmp_path,
        {
            "train.sh": "export A=1 B=two\nnohup python3 src/app/main.py &\n"
            "python -m torch.distributed.run --nproc_per_node 2 other.py\n"
            "# python commented.py\nbash scripts/inner.sh\n",
            "src/app/main.py": "from . import helper\n",
            "src/app/helper.py": "import os\nos.environ['WANDB_PROJECT'] = 'from-code'\n",
            "other.py": "x = (\n",  # does not parse: reported, not raised
            "commented.py": "import wandb\n",
            "scripts/inner.sh": "python leaf.py\n",
            "leaf.py": "",
        },
    )
    scan = scan_launch_script(repo / "train.sh", repo)
    names = {p.name for p in scan.files}
    assert names == {"train.sh", "main.py", "helper.py", "other.py", "inner.sh", "leaf.py"}
    assert scan.env == {"A": "1", "B": "two", "WANDB_PROJECT": "from-code"}
    assert any("other.py:2" in p or "other.py:1" in p for p in scan.problems)
    assert "wandb" not in scan.modules
