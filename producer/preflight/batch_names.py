"""The names training frameworks give the batch size, accumulation, device count and lr.

Owns the table of spellings and what each one means: whether a batch size is one device's
(multiplied by gradient accumulation and the device count to give the effective batch) or the
global batch of one optimizer step, in samples or in tokens, and which section or neighbour a
spelling needs to mean that (`train_batch_size` is DeepSpeed's global batch beside
`train_micro_batch_size_per_gpu`, a plain batch size elsewhere). Also the settings with which a
framework scales the learning rate itself. Reading a config with these tables is `scaling.py`'s;
`risky_keys.py` takes its batch, accumulation and learning-rate spellings from here.

Names are matched on a key's last dotted segment, lower-cased, `-` read as `_`
(`SOLVER.IMS_PER_BATCH` → `ims_per_batch`). A key written as a command-line option (`-b`,
`--batch-size`) matches its option spelling first (`_b`), then the name without the dashes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Scope(StrEnum):
    GLOBAL = "global"  # the batch of one optimizer step, over every device and accumulation
    PER_DEVICE = "per device"  # one device's batch: x accumulation x devices
    PLAIN = "plain"  # not said; read as one device's, as PyTorch DDP, Lightning and timm do


class Unit(StrEnum):
    SAMPLES = "samples"
    TOKENS = "tokens"


@dataclass(frozen=True)
class BatchName:
    """One spelling of a training batch size and how it adds up to the effective batch."""

    leaf: str  # normalised last key segment
    scope: Scope
    framework: str = ""
    unit: Unit = Unit.SAMPLES
    sections: tuple[str, ...] = ()  # only directly under a section of one of these names
    beside: tuple[str, ...] = ()  # only in a section that also has one of these keys
    # Ultralytics: gradients accumulate until this neighbour's nominal batch (its default).
    nominal: tuple[str, float] | None = None

    @property
    def meaning(self) -> str | None:
        """For rename pairing: a per-device and a global batch are not one setting."""
        if self.scope is Scope.PLAIN:
            return None
        return "tokens" if self.unit is Unit.TOKENS else self.scope.value.replace(" ", "-")

    @property
    def label(self) -> str:
        parts = [self.framework] if self.framework else []
        if self.scope is not Scope.PLAIN:
            parts.append(f"{self.scope}")
        if self.unit is Unit.TOKENS:
            parts.append("tokens")
        return ", ".join(parts)


_G, _D, _P = Scope.GLOBAL, Scope.PER_DEVICE, Scope.PLAIN
_DEEPSPEED_KEYS = ("train_micro_batch_size_per_gpu", "zero_optimization", "steps_per_print")
_ULTRALYTICS_KEYS = ("imgsz", "lr0", "lrf", "nbs")

# In order of preference: a config's global batch beats a per-device one, which beats a plain
# one; within a scope, the first spelling in this table wins (the more specific come first).
BATCH_NAMES: tuple[BatchName, ...] = (
    BatchName("ims_per_batch", _G, "Detectron2 images per batch"),
    BatchName("train_batch_size", _G, "DeepSpeed", beside=_DEEPSPEED_KEYS),
    BatchName("batch", _G, "Ultralytics", beside=_ULTRALYTICS_KEYS, nominal=("nbs", 64.0)),
    BatchName("global_batch_size", _G, "NeMo/Megatron/T5X"),
    BatchName("total_batch_size", _G),
    BatchName("effective_batch_size", _G),
    BatchName("per_device_train_batch_size", _D, "HF Transformers"),
    BatchName("per_gpu_train_batch_size", _D, "HF Transformers"),
    BatchName("train_micro_batch_size_per_gpu", _D, "DeepSpeed"),
    BatchName("micro_batch_size", _D, "NeMo/Megatron"),
    BatchName("samples_per_gpu", _D, "MMDetection 2.x"),
    BatchName("imgs_per_gpu", _D, "MMDetection 1.x"),
    BatchName("batch_size", _D, "MMEngine", sections=("train_dataloader",)),
    BatchName("batch_size", _D, "PyTorch Lightning", sections=("data", "datamodule")),
    BatchName("per_device_batch_size", _D),
    BatchName("batch_size_per_device", _D),
    BatchName("batch_size_per_gpu", _D),
    BatchName("max_tokens", _D, "fairseq", Unit.TOKENS),
    BatchName("batch_size", _P),
    BatchName("train_batch_size", _P),
    BatchName("bs", _P),
    BatchName("_b", _P, "timm"),
    BatchName("batch", _P),
)

# Gradient accumulation: leaf → who spells it so.
ACCUM_NAMES: dict[str, str] = {
    "gradient_accumulation_steps": "HF Transformers/DeepSpeed",
    "accumulate_grad_batches": "PyTorch Lightning",
    "grad_accum_steps": "timm",
    "update_freq": "fairseq",
    "accum_iter": "MAE",
    "accum_freq": "OpenCLIP",
    "backward_passes_per_step": "Horovod",
    "grad_accum": "",
    "gradient_accumulation": "",
    "grad_accumulation_steps": "",
    "accumulation_steps": "",
    "accum_steps": "",
}

# Device counts: all processes at once, per node (x nodes), and the node count.
WORLD_NAMES: tuple[str, ...] = ("world_size", "distributed_world_size", "num_processes")
DEVICE_NAMES: tuple[str, ...] = (
    "devices",
    "gpus",
    "n_gpu",
    "n_gpus",
    "num_gpus",
    "ngpus",
    "num_devices",
    "nproc_per_node",
    "gpus_per_node",
    "gpu_ids",
)
NODE_NAMES: tuple[str, ...] = ("num_nodes", "nnodes", "n_nodes")

# The learning rate, in order of preference when a config has several (`optimizer.lr` over a
# scheduler's `max_lr`). `BASE_LR` (Detectron2) and `lr0` (Ultralytics) are among them.
LR_NAMES: tuple[str, ...] = (
    "lr",
    "learning_rate",
    "base_lr",
    "peak_lr",
    "max_lr",
    "lr0",
    "base_learning_rate",
    "initial_learning_rate",
    "init_lr",
    "initial_lr",
)

# Sections of a config that are not training: their batch sizes are not the training batch.
NOT_TRAINING = frozenset(
    {"val", "valid", "validation", "eval", "evaluation", "test", "testing", "predict", "inference"}
)


class AutoWhen(StrEnum):
    TRUE = "is true"
    NO_LR = "is set and no lr is"


@dataclass(frozen=True)
class AutoScale:
    """A setting with which the framework scales the lr to the batch itself."""

    framework: str
    key: str  # dotted suffix, normalised
    when: AutoWhen


AUTO_SCALES: tuple[AutoScale, ...] = (
    AutoScale("MMEngine", "auto_scale_lr.enable", AutoWhen.TRUE),
    AutoScale("timm", "lr_base", AutoWhen.NO_LR),
)


def normal(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def spellings(name: str) -> tuple[str, ...]:
    """The normalised spellings to look a key's last segment up by, most specific first."""
    found = normal(name)
    if name.strip().startswith("-"):
        return (found, found.lstrip("_"))
    return (found,)
