"""The frameworks' name table, reading an effective batch out of one config, Python configs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from producer.preflight.batch_names import (
    ACCUM_NAMES,
    BATCH_NAMES,
    DEVICE_NAMES,
    LR_NAMES,
    NODE_NAMES,
    WORLD_NAMES,
    normal,
)
from producer.preflight.configs import ConfigParseError, load_config, parse_config_text
from producer.preflight.risky_keys import RiskySlot, classify, same_meaning, slot_of
from producer.preflight.scaling import find_effective_batch, find_lr


def test_table_spellings_are_normalised_and_unique_per_kind() -> None:
    names = [b.leaf for b in BATCH_NAMES]
    others = [*ACCUM_NAMES, *LR_NAMES, *WORLD_NAMES, *DEVICE_NAMES, *NODE_NAMES]
    for name in names + others:
        assert name == normal(name), name
    assert len(others) == len(set(others))
    assert not set(names) & set(others)


def test_risky_slots_come_from_the_table() -> None:
    for row in BATCH_NAMES:
        assert slot_of(f"a.{row.leaf}") is RiskySlot.BATCH_SIZE, row
    for name in ACCUM_NAMES:
        assert slot_of(name) is RiskySlot.GRAD_ACCUM, name
    for name in LR_NAMES:
        assert slot_of(f"optimizer.{name}") is RiskySlot.LEARNING_RATE, name
    assert classify("SOLVER.IMS_PER_BATCH") == (RiskySlot.BATCH_SIZE, "global")
    assert classify("-b") == (RiskySlot.BATCH_SIZE, None)
    assert classify("--batch-size") == (RiskySlot.BATCH_SIZE, None)
    assert slot_of("b") is None  # only the command-line spelling `-b` is timm's batch size
    assert slot_of("SOLVER.BASE_LR") is RiskySlot.LEARNING_RATE
    assert not same_meaning("max_tokens", "micro_batch_size")  # tokens are not samples
    assert not same_meaning("micro_batch_size", "global_batch_size")
    assert same_meaning("batch_size", "global_batch_size")  # plain: either


@pytest.mark.parametrize(
    ("flat", "size", "how"),
    [
        ({"trainer.gpus": "0,1", "batch_size": 8}, 16, "batch_size 8 x trainer.gpus 2 = 16"),
        ({"batch_size": 8, "gpu_ids": [0, 1, 2]}, 24, "gpu_ids 3 = 24"),
        ({"batch_size": 8, "devices": 4, "world_size": 2}, 16, "batch_size 8 x world_size 2 = 16"),
        ({"batch_size": 8, "gpus": 0}, 8, "gpus = 0 is not a count: not multiplied in"),
        ({"batch_size": 8, "devices": -1}, 8, "devices = -1 is not a count"),
        ({"batch_size": "32", "grad_accum_steps": 2}, 64, "batch_size 32 x grad_accum_steps 2"),
        ({"--batch-size": 48}, 48, "--batch-size 48"),
        ({"batch": 16, "imgsz": 640, "nbs": 32}, 32, "accumulation 2 (up to the nominal batch"),
        ({"batch_size": 4, "update_freq": [8, 4]}, 32, "update_freq 8"),
    ],
)
def test_effective_batch(flat: dict[str, Any], size: float, how: str) -> None:
    found = find_effective_batch(flat)
    assert found is not None
    assert found.size == size
    assert how in found.how, found.how


@pytest.mark.parametrize(
    "flat",
    [
        {"b": 32},  # not a command-line option: an unrelated key
        {"batch": -1, "imgsz": 640},  # Ultralytics AutoBatch: not known before the run
        {"batch_size": 0.7},
        {"batch_size": "auto"},
        {"val_dataloader.batch_size": 8, "test.batch_size": 4, "evaluation.bs": 2},
        {"batch_size": True},
    ],
)
def test_no_training_batch(flat: dict[str, Any]) -> None:
    assert find_effective_batch(flat) is None


def test_a_global_batch_wins_over_per_device_and_plain_ones() -> None:
    flat = {"batch_size": 1, "micro_batch_size": 2, "gradient_accumulation_steps": 8}
    flat["global_batch_size"] = 512
    found = find_effective_batch(flat)
    assert found is not None and found.size == 512
    flat.pop("global_batch_size")
    found = find_effective_batch(flat)
    assert found is not None and found.size == 16 and found.how.startswith("micro_batch_size 2")


def test_deepspeed_train_batch_size_is_global_only_beside_deepspeed_keys() -> None:
    plain = find_effective_batch({"train_batch_size": 32, "gradient_accumulation_steps": 4})
    assert plain is not None and plain.size == 128
    ds = {"ds.train_batch_size": 32, "ds.gradient_accumulation_steps": 4, "ds.steps_per_print": 10}
    found = find_effective_batch(ds)
    assert found is not None and found.size == 32 and "(DeepSpeed, global)" in found.how


def test_lr_by_preferred_spelling_then_file_order() -> None:
    found = find_lr({"scheduler.max_lr": 0.5, "optimizer.lr": 0.1, "warmup.lr": 0.0})
    assert found is not None and (found.key, found.value) == ("optimizer.lr", 0.1)
    found = find_lr({"optimization.lr": [0.25, 0.1]})  # fairseq: one lr per epoch, first wins
    assert found is not None and found.value == 0.25
    assert find_lr({"lr": None, "min_lr": 1e-6}) is None


MMDET = """\
_base_ = ['../_base_/default_runtime.py']
from mmengine.config import read_base  # imports are not data
data_root = 'data/coco/'
base = dict(type='SGD', momentum=0.9)
train_dataloader = dict(
    batch_size=2,  # why: 8 GPUs x 2 = 16, the paper's batch
    dataset=dict(data_root=data_root, ann_file=data_root + 'annotations/train.json'),
)
optim_wrapper = dict(optimizer=dict(base, lr=0.02 / 8 * 4, weight_decay=-(-1e-4)))
param_scheduler = [dict(type='LinearLR', start_factor=0.001), {**base, 'end': 12}]
model = build_model(cfg)  # a call: not known without running the file
max_epochs: int = 12
optimizer.lr = 0.01
"""


def test_python_config_is_read_as_data(tmp_path: Path) -> None:
    path = tmp_path / "faster-rcnn_r50_8xb2.py"
    path.write_text(MMDET)
    loaded = load_config(path)
    assert loaded.data["train_dataloader"] == {
        "batch_size": 2,
        "dataset": {"data_root": "data/coco/", "ann_file": "data/coco/annotations/train.json"},
    }
    assert loaded.data["optim_wrapper"]["optimizer"] == {
        "type": "SGD",
        "momentum": 0.9,
        "lr": 0.01,
        "weight_decay": 1e-4,
    }
    assert loaded.data["param_scheduler"][1] == {"type": "SGD", "momentum": 0.9, "end": 12}
    assert loaded.data["max_epochs"] == 12 and loaded.data["optimizer"] == {"lr": 0.01}
    assert "model" not in loaded.data and "read_base" not in loaded.data
    assert loaded.key_lines["train_dataloader.batch_size"] == 6
    assert loaded.why_for("train_dataloader.batch_size") == "8 GPUs x 2 = 16, the paper's batch"


@pytest.mark.parametrize(
    ("text", "line"),
    [("lr = 0.1\nbatch_size = (\n", 2), ("lr = = 1\n", 1), ("x = 1\n  y = 2\n", 2)],
)
def test_broken_python_config_names_its_line(tmp_path: Path, text: str, line: int) -> None:
    path = tmp_path / "broken.py"
    path.write_text(text)
    with pytest.raises(ConfigParseError) as caught:
        load_config(path)
    assert caught.value.line == line and f"{path}:{line}:" in str(caught.value)


def test_python_config_without_literals_is_empty() -> None:
    loaded = parse_config_text(Path("train.py"), "import torch\n\ndef main():\n    lr = 0.1\n")
    assert loaded.data == {}
