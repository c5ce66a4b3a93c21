"""The config keys known to regress silently, recognised by name in any nesting.

Owns the spellings of each risky family and what counts as "the same key under another name"
(`lr` in one file and `optimizer.learning_rate` in the other). The diff itself is
`config_diff.py`'s.
"""

from __future__ import annotations

from enum import StrEnum


class RiskySlot(StrEnum):
    """One risky setting; the values are the names users pass to `--explain`."""

    WORKERS = "num_workers"
    BATCH_SIZE = "batch_size"
    LEARNING_RATE = "lr"
    BETAS = "betas"
    WEIGHT_DECAY = "weight_decay"
    PRECISION = "precision"
    GRAD_ACCUM = "grad_accum"
    SEED = "seed"


WHY_RISKY: dict[RiskySlot, str] = {
    RiskySlot.WORKERS: "data-loader workers (8 is wrong on a network file system)",
    RiskySlot.BATCH_SIZE: "batch size (per-device versus global under DDP)",
    RiskySlot.LEARNING_RATE: "learning rate (scales linearly with batch size)",
    RiskySlot.BETAS: "optimizer betas (paper versus framework defaults)",
    RiskySlot.WEIGHT_DECAY: "weight decay (paper versus framework defaults)",
    RiskySlot.PRECISION: "mixed precision (fp16 versus bf16 matters for some models)",
    RiskySlot.GRAD_ACCUM: "gradient accumulation (changes the effective batch)",
    RiskySlot.SEED: "seed (keep it set for reproducibility)",
}

# leaf spelling → (slot, meaning). Two spellings are one key renamed only when their meanings
# agree: `fp16` and `bf16` are both precision but not the same setting; a per-device and a
# global batch size are not either. `None` is compatible with any meaning of its slot.
_SPELLINGS: dict[str, tuple[RiskySlot, str | None]] = {
    **{
        k: (RiskySlot.WORKERS, None)
        for k in (
            "num_workers",
            "workers",
            "n_workers",
            "dataloader_workers",
            "dataloader_num_workers",
            "num_data_workers",
            "loader_workers",
        )
    },
    **{k: (RiskySlot.BATCH_SIZE, None) for k in ("batch_size", "train_batch_size", "bs")},
    **{
        k: (RiskySlot.BATCH_SIZE, "per-device")
        for k in (
            "per_device_train_batch_size",
            "per_gpu_train_batch_size",
            "micro_batch_size",
            "train_micro_batch_size_per_gpu",
            "batch_size_per_device",
            "batch_size_per_gpu",
        )
    },
    **{
        k: (RiskySlot.BATCH_SIZE, "global")
        for k in ("global_batch_size", "total_batch_size", "effective_batch_size")
    },
    **{
        k: (RiskySlot.LEARNING_RATE, None)
        for k in ("lr", "learning_rate", "base_lr", "max_lr", "peak_lr", "init_lr")
    },
    **{k: (RiskySlot.BETAS, None) for k in ("betas", "adam_betas")},
    **{k: (RiskySlot.BETAS, "beta1") for k in ("beta1", "beta_1", "adam_beta1")},
    **{k: (RiskySlot.BETAS, "beta2") for k in ("beta2", "beta_2", "adam_beta2")},
    **{k: (RiskySlot.WEIGHT_DECAY, None) for k in ("weight_decay", "wd")},
    **{
        k: (RiskySlot.PRECISION, None)
        for k in ("precision", "mixed_precision", "amp", "use_amp", "dtype", "compute_dtype")
    },
    "fp16": (RiskySlot.PRECISION, "fp16"),
    "bf16": (RiskySlot.PRECISION, "bf16"),
    **{
        k: (RiskySlot.GRAD_ACCUM, None)
        for k in (
            "gradient_accumulation_steps",
            "accumulate_grad_batches",
            "grad_accum",
            "grad_accum_steps",
            "gradient_accumulation",
            "accumulation_steps",
        )
    },
    **{k: (RiskySlot.SEED, None) for k in ("seed", "random_seed", "global_seed")},
}


def leaf(dotted: str) -> str:
    return dotted.rsplit(".", 1)[-1]


def parent(dotted: str) -> str:
    return dotted.rsplit(".", 1)[0] if "." in dotted else ""


def _normal(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def classify(dotted: str) -> tuple[RiskySlot, str | None] | None:
    """The risky slot (and meaning) of a dotted key by its last segment, or None."""
    return _SPELLINGS.get(_normal(leaf(dotted)))


def slot_of(dotted: str) -> RiskySlot | None:
    found = classify(dotted)
    return found[0] if found else None


def same_meaning(old_key: str, new_key: str) -> bool:
    """Whether two spellings of one slot name the same setting (a rename, not a swap)."""
    a, b = classify(old_key), classify(new_key)
    if a is None or b is None or a[0] is not b[0]:
        return False
    return a[1] is None or b[1] is None or a[1] == b[1]
