"""The scaling rule under every major framework's batch-size names, through the config-diff check.

One must-report case per framework convention (the batch moved, the lr did not) and the
must-not-report cases beside them (lr scaled linearly or by the square root, accumulation or
device count compensating a smaller per-device batch, the framework scaling the lr itself).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest

from producer.preflight.config_check import check_config_diff
from producer.preflight.configs import load_config
from producer.preflight.report import Finding, Verdict

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
Y, J, T, P = ".yaml", ".json", ".toml", ".py"


@dataclass(frozen=True)
class Case:
    id: str
    ref: tuple[str, str]  # (suffix, text)
    run: tuple[str, str]
    flagged: bool  # the scaling rule reports a broken rule
    must: tuple[str, ...] = ()  # substrings of the scaling line (issue or note)
    must_not: tuple[str, ...] = ()  # substrings no detail line may contain
    explain: dict[str, str] = field(default_factory=dict)


REPORTED = [
    Case(
        "plain-batch_size-yaml",
        (Y, "seed: 1\nbatch_size: 256\nlr: 0.1\n"),
        (Y, "seed: 1\nbatch_size: 512\nlr: 0.1\n"),
        True,
        ("effective batch 256 → 512 (x2)", "lr stayed 0.1 (lr)", "lr = 0.2", "0.1414"),
    ),
    Case(
        "plain-bs-json",
        (J, '{"seed": 1, "bs": 64, "optim": {"lr": 0.001}}'),
        (J, '{"seed": 1, "bs": 128, "optim": {"lr": 0.001}}'),
        True,
        ("reference bs 64; run bs 128", "(optim.lr)"),
    ),
    Case(
        "plain-global_batch_size-toml",
        (T, "seed = 1\n[train]\nglobal_batch_size = 1024\nlearning_rate = 3e-4\n"),
        (T, "seed = 1\n[train]\nglobal_batch_size = 2048\nlearning_rate = 3e-4\n"),
        True,
        ("train.global_batch_size 1024 (NeMo/Megatron/T5X, global)", "(train.learning_rate)"),
    ),
    Case(
        "plain-total_batch_size-yaml",
        (Y, "seed: 1\ntotal_batch_size: 64\noptimizer:\n  lr: 0.01\n"),
        (Y, "seed: 1\ntotal_batch_size: 32\noptimizer:\n  lr: 0.01\n"),
        True,
        ("effective batch 64 → 32 (x0.5)", "total_batch_size 64 (global)"),
    ),
    Case(
        "plain-train_batch_size-with-accumulation-yaml",
        (Y, "seed: 1\ntrain_batch_size: 32\ngradient_accumulation_steps: 2\nlearning_rate: 5e-5\n"),
        (Y, "seed: 1\ntrain_batch_size: 64\ngradient_accumulation_steps: 2\nlearning_rate: 5e-5\n"),
        True,
        ("train_batch_size 32 x gradient_accumulation_steps 2 = 64", "= 128"),
    ),
    Case(
        "hf-transformers-per-device-x-accum-x-n_gpu-json",
        (
            J,
            '{"seed": 42, "per_device_train_batch_size": 16, "gradient_accumulation_steps": 4,'
            ' "n_gpu": 2, "learning_rate": 5e-5}',
        ),
        (
            J,
            '{"seed": 42, "per_device_train_batch_size": 16, "gradient_accumulation_steps": 4,'
            ' "n_gpu": 4, "learning_rate": 5e-5}',
        ),
        True,
        (
            "per_device_train_batch_size 16 (HF Transformers, per device) x "
            "gradient_accumulation_steps 4 x n_gpu 2 = 128",
            "x n_gpu 4 = 256",
            "(learning_rate)",
        ),
    ),
    Case(
        "deepspeed-train_batch_size-is-global-json",
        (
            J,
            '{"seed": 1, "train_batch_size": 256, "train_micro_batch_size_per_gpu": 16,'
            ' "gradient_accumulation_steps": 4, "zero_optimization": {"stage": 2},'
            ' "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}',
        ),
        (
            J,
            '{"seed": 1, "train_batch_size": 512, "train_micro_batch_size_per_gpu": 16,'
            ' "gradient_accumulation_steps": 4, "zero_optimization": {"stage": 2},'
            ' "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}',
        ),
        True,
        ("train_batch_size 256 (DeepSpeed, global)", "(optimizer.params.lr)", "x2"),
    ),
    Case(
        "deepspeed-micro-x-accum-json",
        (
            J,
            '{"seed": 1, "train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2,'
            ' "optimizer": {"params": {"lr": 2e-5}}}',
        ),
        (
            J,
            '{"seed": 1, "train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 8,'
            ' "optimizer": {"params": {"lr": 2e-5}}}',
        ),
        True,
        (
            "train_micro_batch_size_per_gpu 8 (DeepSpeed, per device) x "
            "gradient_accumulation_steps 2 = 16",
            "effective batch 16 → 64",
        ),
    ),
    Case(
        "lightning-data-batch_size-x-accum-x-devices-yaml",
        (
            Y,
            "seed_everything: 7\nmodel:\n  lr: 0.001\ndata:\n  batch_size: 32\n"
            "trainer:\n  accumulate_grad_batches: 2\n  devices: 4\n",
        ),
        (
            Y,
            "seed_everything: 7\nmodel:\n  lr: 0.001\ndata:\n  batch_size: 32\n"
            "trainer:\n  accumulate_grad_batches: 2\n  devices: 8\n",
        ),
        True,
        (
            "data.batch_size 32 (PyTorch Lightning, per device) x "
            "trainer.accumulate_grad_batches 2 x trainer.devices 4 = 256",
            "(model.lr)",
        ),
    ),
    Case(
        "lightning-datamodule-device-list-and-nodes-yaml",
        (
            Y,
            "seed: 1\noptimizer:\n  lr: 0.1\ndatamodule:\n  batch_size: 64\n"
            "trainer:\n  devices: [0, 1]\n  num_nodes: 1\n",
        ),
        (
            Y,
            "seed: 1\noptimizer:\n  lr: 0.1\ndatamodule:\n  batch_size: 64\n"
            "trainer:\n  devices: [0, 1]\n  num_nodes: 2\n",
        ),
        True,
        ("trainer.devices 2 x trainer.num_nodes 1 = 128", "trainer.num_nodes 2 = 256"),
    ),
    Case(
        "timm-args-yaml",
        (Y, "seed: 42\nbatch_size: 128\ngrad_accum_steps: 1\nlr: 0.05\nepochs: 300\n"),
        (Y, "seed: 42\nbatch_size: 256\ngrad_accum_steps: 1\nlr: 0.05\nepochs: 300\n"),
        True,
        ("batch_size 128 x grad_accum_steps 1 = 128", "lr = 0.1"),
    ),
    Case(
        "timm-command-line-b-json",
        (J, '{"--seed": 0, "-b": 128, "--lr": 0.1}'),
        (J, '{"--seed": 0, "-b": 256, "--lr": 0.1}'),
        True,
        ("-b 128 (timm)", "(--lr)"),
    ),
    Case(
        "detectron2-ims_per_batch-base_lr-yaml",
        (Y, "SEED: 1\nSOLVER:\n  IMS_PER_BATCH: 16\n  BASE_LR: 0.02\n"),
        (Y, "SEED: 1\nSOLVER:\n  IMS_PER_BATCH: 32\n  BASE_LR: 0.02\n"),
        True,
        (
            "SOLVER.IMS_PER_BATCH 16 (Detectron2 images per batch, global)",
            "lr stayed 0.02 (SOLVER.BASE_LR)",
            "lr = 0.04",
        ),
    ),
    Case(
        "detectron2-lazyconfig-python",
        (
            P,
            "from ..common.optim import SGD as optimizer\n"
            "train = dict(seed=1)\n"
            "dataloader.train.total_batch_size = 16\n"
            "optimizer.lr = 0.02\n",
        ),
        (
            P,
            "from ..common.optim import SGD as optimizer\n"
            "train = dict(seed=1)\n"
            "dataloader.train.total_batch_size = 64\n"
            "optimizer.lr = 0.02\n",
        ),
        True,
        ("dataloader.train.total_batch_size 16 (global)", "(x4)", "(optimizer.lr)"),
    ),
    Case(
        "mmengine-train_dataloader-python",
        (
            P,
            "val_dataloader = dict(batch_size=1, num_workers=2)\n"
            "train_dataloader = dict(batch_size=2, num_workers=2)\n"
            "optim_wrapper = dict(optimizer=dict(type='SGD', lr=0.02, momentum=0.9))\n"
            "auto_scale_lr = dict(enable=False, base_batch_size=16)\n"
            "randomness = dict(seed=0)\n",
        ),
        (
            P,
            "val_dataloader = dict(batch_size=8, num_workers=2)\n"
            "train_dataloader = dict(batch_size=4, num_workers=2)\n"
            "optim_wrapper = dict(optimizer=dict(type='SGD', lr=0.02, momentum=0.9))\n"
            "auto_scale_lr = dict(enable=False, base_batch_size=16)\n"
            "randomness = dict(seed=0)\n",
        ),
        True,
        (
            "reference train_dataloader.batch_size 2 (MMEngine, per device)",
            "(optim_wrapper.optimizer.lr)",
        ),
        must_not=("val_dataloader.batch_size 1 (",),
    ),
    Case(
        "mmdetection-2-samples_per_gpu-python",
        (
            P,
            "data = dict(samples_per_gpu=2, workers_per_gpu=2, test=dict(samples_per_gpu=8))\n"
            "optimizer = dict(type='SGD', lr=0.02)\nseed = 0\n",
        ),
        (
            P,
            "data = dict(samples_per_gpu=4, workers_per_gpu=2, test=dict(samples_per_gpu=8))\n"
            "optimizer = dict(type='SGD', lr=0.02)\nseed = 0\n",
        ),
        True,
        ("data.samples_per_gpu 2 (MMDetection 2.x, per device)", "effective batch 2 → 4"),
    ),
    Case(
        "mmdetection-1-imgs_per_gpu-json",
        (J, '{"seed": 0, "data": {"imgs_per_gpu": 2}, "optimizer": {"lr": 0.02}}'),
        (J, '{"seed": 0, "data": {"imgs_per_gpu": 8}, "optimizer": {"lr": 0.02}}'),
        True,
        ("data.imgs_per_gpu 2 (MMDetection 1.x, per device)", "(x4)"),
    ),
    Case(
        "ultralytics-batch-past-nominal-yaml",
        (Y, "seed: 0\nimgsz: 640\nbatch: 16\nlr0: 0.01\n"),
        (Y, "seed: 0\nimgsz: 640\nbatch: 128\nlr0: 0.01\n"),
        True,
        (
            "batch 16 (Ultralytics, global) x accumulation 4 (up to the nominal batch nbs 64) = 64",
            "(lr0)",
            "effective batch 64 → 128",
        ),
    ),
    Case(
        "keras-batch_size-json",
        (J, '{"seed": 1, "batch_size": 32, "optimizer": {"config": {"learning_rate": 0.001}}}'),
        (J, '{"seed": 1, "batch_size": 128, "optimizer": {"config": {"learning_rate": 0.001}}}'),
        True,
        ("(x4)", "(optimizer.config.learning_rate)", "lr = 0.004"),
    ),
    Case(
        "fairseq-max_tokens-update_freq-world-yaml",
        (
            Y,
            "common:\n  seed: 1\ndataset:\n  max_tokens: 4096\noptimization:\n"
            "  update_freq: [1]\n  lr: [0.0005]\ndistributed_training:\n"
            "  distributed_world_size: 8\n",
        ),
        (
            Y,
            "common:\n  seed: 1\ndataset:\n  max_tokens: 4096\noptimization:\n"
            "  update_freq: [2]\n  lr: [0.0005]\ndistributed_training:\n"
            "  distributed_world_size: 8\n",
        ),
        True,
        (
            "dataset.max_tokens 4096 (fairseq, per device, tokens) x optimization.update_freq 1 "
            "x distributed_training.distributed_world_size 8 = 32768 tokens",
            "effective batch 32768 → 65536",
            "(optimization.lr)",
        ),
    ),
    Case(
        "nemo-global-over-micro-yaml",
        (
            Y,
            "trainer:\n  devices: 8\n  num_nodes: 1\nmodel:\n  seed: 1234\n  micro_batch_size: 4\n"
            "  global_batch_size: 256\n  optim:\n    lr: 1.0e-4\n",
        ),
        (
            Y,
            "trainer:\n  devices: 8\n  num_nodes: 2\nmodel:\n  seed: 1234\n  micro_batch_size: 4\n"
            "  global_batch_size: 512\n  optim:\n    lr: 1.0e-4\n",
        ),
        True,
        ("model.global_batch_size 256 (NeMo/Megatron/T5X, global)", "(model.optim.lr)"),
    ),
    Case(
        "megatron-micro-x-world_size-json",
        (J, '{"seed": 1234, "micro_batch_size": 4, "world_size": 8, "lr": 3e-4}'),
        (J, '{"seed": 1234, "micro_batch_size": 4, "world_size": 16, "lr": 3e-4}'),
        True,
        ("micro_batch_size 4 (NeMo/Megatron, per device) x world_size 8 = 32", "= 64"),
    ),
    Case(
        "t5x-jax-batch_size-json",
        (J, '{"seed": 0, "train": {"batch_size": 128}, "optimizer": {"learning_rate": 1e-3}}'),
        (J, '{"seed": 0, "train": {"batch_size": 256}, "optimizer": {"learning_rate": 1e-3}}'),
        True,
        ("reference train.batch_size 128; run train.batch_size 256",),
    ),
    Case(
        "generic-micro-x-accum-x-num_gpus-toml",
        (T, "seed = 1\nmicro_batch_size = 8\ngrad_accum = 4\nnum_gpus = 2\npeak_lr = 6e-4\n"),
        (T, "seed = 1\nmicro_batch_size = 8\ngrad_accum = 4\nnum_gpus = 4\npeak_lr = 6e-4\n"),
        True,
        ("micro_batch_size 8 (NeMo/Megatron, per device) x grad_accum 4 x num_gpus 2 = 64",),
    ),
]

NOT_REPORTED = [
    Case(
        "lr-scaled-linearly-hf-yaml",
        (Y, "seed: 1\nper_device_train_batch_size: 16\nlearning_rate: 5.0e-5\n"),
        (Y, "seed: 1\nper_device_train_batch_size: 32\nlearning_rate: 1.0e-4\n"),
        False,
        ("effective batch 16 → 32 (x2), lr 5e-05 → 0.0001", "the linear rule"),
    ),
    Case(
        "lr-scaled-by-square-root-keras-json",
        (J, '{"seed": 1, "batch_size": 32, "learning_rate": 0.001}'),
        (J, '{"seed": 1, "batch_size": 128, "learning_rate": 0.002}'),
        False,
        ("the square-root rule",),
    ),
    Case(
        "accumulation-compensates-micro-batch-lightning-yaml",
        (Y, "seed: 1\nmodel:\n  lr: 0.1\ndata:\n  batch_size: 64\n"),
        (
            Y,
            "seed: 1\nmodel:\n  lr: 0.1\ndata:\n  batch_size: 32\ntrainer:\n"
            "  accumulate_grad_batches: 2\n",
        ),
        False,
        ("effective batch unchanged at 64", "trainer.accumulate_grad_batches 2 = 64"),
        explain={"batch_size": "half fits in memory", "accumulate_grad_batches": "keeps 64"},
    ),
    Case(
        "accumulation-compensates-micro-batch-deepspeed-json",
        (
            J,
            '{"seed": 1, "train_micro_batch_size_per_gpu": 32, "gradient_accumulation_steps": 2,'
            ' "optimizer": {"params": {"lr": 1e-4}}}',
        ),
        (
            J,
            '{"seed": 1, "train_micro_batch_size_per_gpu": 16, "gradient_accumulation_steps": 4,'
            ' "optimizer": {"params": {"lr": 1e-4}}}',
        ),
        False,
        ("effective batch unchanged at 64",),
    ),
    Case(
        "more-devices-compensate-smaller-batch-yaml",
        (Y, "seed: 1\nlr: 0.1\ndata:\n  batch_size: 64\ntrainer:\n  devices: 4\n"),
        (Y, "seed: 1\nlr: 0.1\ndata:\n  batch_size: 32\ntrainer:\n  devices: 8\n"),
        False,
        ("effective batch unchanged at 256",),
    ),
    Case(
        "ultralytics-accumulates-to-nominal-batch-yaml",
        (Y, "seed: 0\nimgsz: 640\nbatch: 16\nlr0: 0.01\n"),
        (Y, "seed: 0\nimgsz: 640\nbatch: 32\nlr0: 0.01\n"),
        False,
        ("effective batch unchanged at 64",),
    ),
    Case(
        "mmengine-auto-scale-lr-python",
        (
            P,
            "train_dataloader = dict(batch_size=2)\noptim_wrapper = dict(optimizer=dict(lr=0.02))\n"
            "auto_scale_lr = dict(enable=True, base_batch_size=16)\nrandomness = dict(seed=0)\n",
        ),
        (
            P,
            "train_dataloader = dict(batch_size=4)\noptim_wrapper = dict(optimizer=dict(lr=0.02))\n"
            "auto_scale_lr = dict(enable=True, base_batch_size=16)\nrandomness = dict(seed=0)\n",
        ),
        False,
        ("auto_scale_lr.enable = true: MMEngine scales the lr to the batch itself",),
    ),
    Case(
        "timm-lr-from-lr_base-yaml",
        (Y, "seed: 42\nbatch_size: 128\nlr: null\nlr_base: 0.1\nlr_base_size: 256\n"),
        (Y, "seed: 42\nbatch_size: 256\nlr: null\nlr_base: 0.1\nlr_base_size: 256\n"),
        False,
        ("lr_base = 0.1 and no lr: timm computes the lr from the batch",),
    ),
    Case(
        "nemo-micro-changes-under-fixed-global-yaml",
        (Y, "model:\n  seed: 1\n  micro_batch_size: 4\n  global_batch_size: 256\n  lr: 1e-4\n"),
        (Y, "model:\n  seed: 1\n  micro_batch_size: 8\n  global_batch_size: 256\n  lr: 1e-4\n"),
        False,
        ("effective batch unchanged at 256",),
    ),
    Case(
        "only-the-eval-batch-changed-python",
        (P, "train_dataloader = dict(batch_size=2)\nval_dataloader = dict(batch_size=1)\nseed=0\n"),
        (P, "train_dataloader = dict(batch_size=2)\nval_dataloader = dict(batch_size=8)\nseed=0\n"),
        False,
        ("effective batch unchanged at 2",),
    ),
    Case(
        "tokens-versus-samples-not-compared-yaml",
        (Y, "seed: 1\nmax_tokens: 4096\nlr: 0.0005\n"),
        (Y, "seed: 1\nbatch_size: 32\nlr: 0.0005\n"),
        False,
        ("not comparable: the reference counts tokens",),
    ),
    Case(
        "device-count-auto-on-one-side-not-compared-yaml",
        (Y, "seed: 1\nlr: 0.1\ndata:\n  batch_size: 64\ntrainer:\n  devices: 4\n"),
        (Y, "seed: 1\nlr: 0.1\ndata:\n  batch_size: 64\ntrainer:\n  devices: auto\n"),
        False,
        ("device count is not a number", "trainer.devices = 'auto' is not a count"),
    ),
]


def _check(tmp_path: Path, case: Case) -> Finding:
    ref = tmp_path / f"reference{case.ref[0]}"
    ref.write_text(case.ref[1])
    run = tmp_path / f"intended{case.run[0]}"
    run.write_text(case.run[1])
    return check_config_diff(
        load_config(run), repo=tmp_path, reference=ref, explain=case.explain, now=NOW
    )


def _scaling_lines(finding: Finding) -> list[str]:
    return [d for d in finding.details if d.split("] ", 1)[-1].startswith("effective batch")]


@pytest.mark.parametrize(
    "case", REPORTED + NOT_REPORTED, ids=[c.id for c in REPORTED + NOT_REPORTED]
)
def test_scaling_rule_per_framework(tmp_path: Path, case: Case) -> None:
    finding = _check(tmp_path, case)
    text = "\n".join(finding.details)
    lines = _scaling_lines(finding)
    assert len(lines) == 1, text
    line = lines[0]
    if case.flagged:
        assert line.startswith("[risky] effective batch"), text
        assert "the linear scaling rule gives lr = " in line
        assert finding.verdict is Verdict.FAIL
    else:
        assert line.startswith("[note] "), text
        assert "scaling rule" not in text
    for phrase in case.must:
        assert phrase in line, line
    for phrase in case.must_not:
        assert phrase not in text


def test_every_framework_convention_has_a_reported_case() -> None:
    conventions = {
        "hf-transformers",
        "deepspeed",
        "lightning",
        "timm",
        "detectron2",
        "mmengine",
        "mmdetection",
        "ultralytics",
        "keras",
        "fairseq",
        "nemo",
        "megatron",
        "t5x",
        "plain",
        "generic-micro-x-accum",
    }
    for convention in conventions:
        assert any(c.id.startswith(convention) for c in REPORTED), convention
    assert {c.ref[0] for c in REPORTED + NOT_REPORTED} == {Y, J, T, P}


def test_compensated_batch_with_explained_keys_passes(tmp_path: Path) -> None:
    case = next(
        c for c in NOT_REPORTED if c.id.startswith("accumulation-compensates-micro-batch-l")
    )
    finding = _check(tmp_path, case)
    assert finding.verdict is Verdict.PASS, finding.details
    assert "[explained] changed data.batch_size: 64 → 32" in "\n".join(finding.details)


def test_scaling_finding_can_be_explained_by_the_lr_key(tmp_path: Path) -> None:
    case = next(c for c in REPORTED if c.id.startswith("detectron2-ims"))
    explained = Case(
        case.id,
        case.ref,
        case.run,
        True,
        explain={"IMS_PER_BATCH": "2 GPUs", "BASE_LR": "warmup absorbs it"},
    )
    finding = _check(tmp_path, explained)
    assert finding.verdict is Verdict.PASS, finding.details
    assert any(
        d.startswith("[explained] effective batch 16 → 32") and "warmup absorbs it" in d
        for d in finding.details
    )
