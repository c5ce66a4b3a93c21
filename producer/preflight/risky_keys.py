"""The config keys known to regress silently, recognised by name in any nesting.

Owns the spellings of each risky family and what counts as "the same key under another name"
(`lr` in one file and `optimizer.learning_rate` in the other). The batch-size, accumulation and
learning-rate spellings are the frameworks' table in `batch_names.py`. The diff itself is
`config_diff.py`'s.
"""

from __future__ import annotations

from enum import StrEnum

from producer.preflight.batch_names import ACCUM_NAMES, BATCH_NAMES, LR_NAMES, spellings


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


def _batch_spellings() -> dict[str, tuple[RiskySlot, str | None]]:
    """Batch-size spellings from the frameworks' table; a spelling whose meaning depends on
    its section or neighbours (`batch_size` under `train_dataloader`) keeps its plain meaning."""
    found: dict[str, tuple[RiskySlot, str | None]] = {}
    for name in BATCH_NAMES:
        if not name.sections and not name.beside:
            found.setdefault(name.leaf, (RiskySlot.BATCH_SIZE, name.meaning))
    for name in BATCH_NAMES:
        found.setdefault(name.leaf, (RiskySlot.BATCH_SIZE, None))
    return found


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
    **{k: (RiskySlot.LEARNING_RATE, None) for k in LR_NAMES},
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
    **{k: (RiskySlot.GRAD_ACCUM, None) for k in ACCUM_NAMES},
    **{k: (RiskySlot.SEED, None) for k in ("seed", "random_seed", "global_seed")},
    **_batch_spellings(),
}


def leaf(dotted: str) -> str:
    return dotted.rsplit(".", 1)[-1]


def parent(dotted: str) -> str:
    return dotted.rsplit(".", 1)[0] if "." in dotted else ""


def classify(dotted: str) -> tuple[RiskySlot, str | None] | None:
    """The risky slot (and meaning) of a dotted key by its last segment, or None."""
    for spelling in spellings(leaf(dotted)):
        if spelling in _SPELLINGS:
            return _SPELLINGS[spelling]
    return None


def slot_of(dotted: str) -> RiskySlot | None:
    found = classify(dotted)
    return found[0] if found else None


def same_meaning(old_key: str, new_key: str) -> bool:
    """Whether two spellings of one slot name the same setting (a rename, not a swap)."""
    a, b = classify(old_key), classify(new_key)
    if a is None or b is None or a[0] is not b[0]:
        return False
    return a[1] is None or b[1] is None or a[1] == b[1]
