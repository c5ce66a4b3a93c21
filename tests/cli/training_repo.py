"""A small training repository for the CLI tests: configs, data, a launch script importing wandb."""

from __future__ import annotations

import os
import time
from pathlib import Path

GOOD_NAME = "coco-detr-r50-bs64-lr1e-4"

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
# Same recipe, a new output folder, explained: every check passes or warns.
CLEAN = REFERENCE.replace("output_dir: runs/detr", "output_dir: runs/detr-2  # why: new run")
# Batch size doubled without the learning rate: config-diff must fail (linear scaling rule).
RISKY = REFERENCE.replace("batch_size: 64", "batch_size: 128")

# Variables of the developer's shell that would change what the checks see.
QUIET_ENV: dict[str, str | None] = {
    name: None
    for name in (
        "WANDB_API_KEY",
        "WANDB_PROJECT",
        "NEPTUNE_API_TOKEN",
        "MLFLOW_TRACKING_URI",
        "COLABQ_QUIET_WINDOWS",
        "HF_TOKEN",
    )
}


def make_repo(root: Path, intended: str = CLEAN) -> Path:
    """`root/configs/detr/{baseline,intended}.yaml`, `data/train`, `train.sh` → `train.py`."""
    (root / "configs" / "detr").mkdir(parents=True)
    (root / "data" / "train").mkdir(parents=True)
    (root / "runs").mkdir()
    reference = root / "configs" / "detr" / "baseline.yaml"
    reference.write_text(REFERENCE)
    two_days_ago = time.time() - 2 * 86400
    os.utime(reference, (two_days_ago, two_days_ago))
    (root / "configs" / "detr" / "intended.yaml").write_text(intended)
    (root / "train.sh").write_text("#!/usr/bin/env bash\npython train.py\n")
    (root / "train.py").write_text(
        "import wandb\n\nwandb.init(project='coco-detr', group='bs-sweep')\n"
    )
    return root
