"""Config diff as data: pairs across YAML/JSON/TOML, renamed spellings, the scaling rule."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest

from producer.preflight.config_check import check_config_diff
from producer.preflight.configs import load_config
from producer.preflight.report import Verdict

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Pair:
    id: str
    ref: tuple[str, str]  # (suffix, text)
    new: tuple[str, str]
    verdict: Verdict
    must: tuple[str, ...] = ()  # substrings some detail line must contain
    must_not: tuple[str, ...] = ()  # substrings no detail line may contain
    explain: dict[str, str] = field(default_factory=dict)


Y, J, T = ".yaml", ".json", ".toml"

PAIRS = [
    Pair(
        "identical",
        (Y, "seed: 1\nlr: 0.1\n"),
        (Y, "seed: 1\nlr: 0.1\n"),
        Verdict.PASS,
        must_not=("changed", "added", "removed"),
    ),
    Pair(
        "nested-lr-only",
        (Y, "seed: 1\nbatch_size: 256\noptimizer:\n  lr: 0.1\n"),
        (Y, "seed: 1\nbatch_size: 256\noptimizer:\n  lr: 0.2\n"),
        Verdict.FAIL,
        must=("[risky] changed optimizer.lr: 0.1 → 0.2", "keeps lr = 0.1"),
    ),
    Pair(
        "rename-same-value",
        (Y, "seed: 1\nlr: 0.001\n"),
        (Y, "seed: 1\nlearning_rate: 1e-3\n"),
        Verdict.PASS,
        must=("[same] renamed lr → learning_rate",),
        must_not=("removed lr", "added learning_rate"),
    ),
    Pair(
        "rename-other-parent-json",
        (J, '{"seed": 1, "optim": {"lr": 0.001}}'),
        (J, '{"seed": 1, "optimizer": {"learning_rate": 0.002}}'),
        Verdict.FAIL,
        must=("renamed optim.lr = 0.001 → optimizer.learning_rate = 0.002",),
        must_not=("removed optim.lr",),
    ),
    Pair(
        "batch-without-lr-toml",
        (T, "seed = 1\nbatch_size = 256\n[optim]\nlr = 0.1\n"),
        (T, "seed = 1\nbatch_size = 512\n[optim]\nlr = 0.1\n"),
        Verdict.FAIL,
        must=("changed batch_size: 256 → 512", "linear scaling rule gives lr = 0.2"),
    ),
    Pair(
        "batch-and-lr-scaled-explained-toml",
        (T, "seed = 1\nbatch_size = 256\n[optim]\nlr = 0.1\n"),
        (T, "seed = 1\nbatch_size = 512\n[optim]\nlr = 0.2\n"),
        Verdict.PASS,
        must=("[explained] changed batch_size", "[explained] changed optim.lr"),
        must_not=("linear scaling",),
        explain={"batch_size": "2 GPUs now", "lr": "follows the batch"},
    ),
    Pair(
        "lr-scaled-wrong",
        (Y, "seed: 1\nbatch_size: 256\nlr: 0.1\n"),
        (Y, "seed: 1\nbatch_size: 512\nlr: 0.15\n"),
        Verdict.FAIL,
        must=("x1.5", "linear scaling rule gives lr = 0.2"),
        explain={"batch_size": "2 GPUs now"},
    ),
    Pair(
        "workers-8-unchanged",
        (Y, "seed: 1\nnum_workers: 8\n"),
        (Y, "seed: 1\nnum_workers: 8\n"),
        Verdict.WARN,
        must=("num_workers = 8 > 4: on a network file system",),
    ),
    Pair(
        "workers-4-unchanged",
        (Y, "seed: 1\nnum_workers: 4\n"),
        (Y, "seed: 1\nnum_workers: 4\n"),
        Verdict.PASS,
        must_not=("network file system",),
    ),
    Pair(
        "workers-change-explained-by-line-comment",
        (Y, "seed: 1\ndataloader:\n  workers: 2\n"),
        (Y, "seed: 1\ndataloader:\n  workers: 8  # why: local NVMe, not NFS\n"),
        Verdict.PASS,
        must=("[explained] changed dataloader.workers: 2 → 8", "why: local NVMe, not NFS"),
    ),
    Pair(
        "seed-removed-json",
        (J, '{"seed": 42, "epochs": 3}'),
        (J, '{"epochs": 3}'),
        Verdict.FAIL,
        must=("[risky] removed seed (was 42): the run is no longer reproducible",),
    ),
    Pair(
        "no-seed-anywhere",
        (Y, "epochs: 3\n"),
        (Y, "epochs: 3\n"),
        Verdict.WARN,
        must=("no seed in either config",),
    ),
    Pair(
        "plain-change-unexplained",
        (Y, "seed: 1\nepochs: 10\n"),
        (Y, "seed: 1\nepochs: 20\n"),
        Verdict.WARN,
        must=("[unexplained] changed epochs: 10 → 20",),
    ),
    Pair(
        "plain-change-explained",
        (Y, "seed: 1\nepochs: 10\n"),
        (Y, "seed: 1\nepochs: 20\n"),
        Verdict.PASS,
        must=("why: longer schedule",),
        explain={"epochs": "longer schedule"},
    ),
    Pair(
        "fp16-to-bf16-toml",
        (T, "seed = 1\n[trainer]\nfp16 = true\n"),
        (T, "seed = 1\n[trainer]\nbf16 = true\n"),
        Verdict.FAIL,
        must=("renamed trainer.fp16 = true → trainer.bf16 = true", "mixed precision"),
    ),
    Pair(
        "per-device-vs-global",
        (Y, "seed: 1\nper_device_train_batch_size: 32\n"),
        (Y, "seed: 1\nglobal_batch_size: 32\n"),
        Verdict.FAIL,
        must=("renamed per_device_train_batch_size = 32 → global_batch_size = 32",),
    ),
    Pair(
        "betas-changed",
        (Y, "seed: 1\nadamw:\n  betas: [0.9, 0.999]\n"),
        (Y, "seed: 1\nadamw:\n  betas: [0.9, 0.95]\n"),
        Verdict.FAIL,
        must=("changed adamw.betas", "optimizer betas"),
    ),
    Pair(
        "wd-changed-json",
        (J, '{"seed": 1, "opt": {"wd": 0.05}}'),
        (J, '{"seed": 1, "opt": {"wd": 0.01}}'),
        Verdict.FAIL,
        must=("weight decay",),
    ),
    Pair(
        "grad-accum-up",
        (T, "seed = 1\nbatch_size = 256\nlr = 0.1\n"),
        (T, "seed = 1\nbatch_size = 256\nlr = 0.1\ngradient_accumulation_steps = 4\n"),
        Verdict.FAIL,
        must=("added gradient_accumulation_steps = 4", "gives lr = 0.4"),
    ),
    Pair(
        "accum-compensates-batch",
        (Y, "seed: 1\nbatch_size: 256\naccumulate_grad_batches: 1\n"),
        (Y, "seed: 1\nbatch_size: 128\naccumulate_grad_batches: 2\n"),
        Verdict.FAIL,
        must=("changed batch_size: 256 → 128",),
        must_not=("linear scaling",),
    ),
    Pair(
        "yaml-vs-toml-same-data",
        (Y, "seed: 1\noptim:\n  lr: 1e-3\n  name: adamw\n"),
        (T, 'seed = 1\n[optim]\nlr = 0.001\nname = "adamw"\n'),
        Verdict.PASS,
        must_not=("changed", "added", "removed"),
    ),
    Pair(
        "why-comment-line-above",
        (Y, "seed: 1\nmixup: 0.2\n"),
        (Y, "seed: 1\n# why: mixup off, it hurts small data\nmixup: 0.0\n"),
        Verdict.PASS,
        must=("[explained] changed mixup",),
    ),
    Pair(
        "removed-key-explained-by-mention",
        (Y, "seed: 1\ncutmix: 1.0\nepochs: 3\n"),
        (Y, "seed: 1\n# why: dropped cutmix for the ablation\nepochs: 3\n"),
        Verdict.PASS,
        must=("[explained] removed cutmix",),
    ),
    Pair(
        "nested-added-and-removed",
        (J, '{"seed": 1, "model": {"depth": 12}}'),
        (J, '{"seed": 1, "model": {"width": 768}}'),
        Verdict.WARN,
        must=("added model.width = 768", "removed model.depth (was 12)"),
    ),
]


def _write(folder: Path, name: str, spec: tuple[str, str]) -> Path:
    path = folder / f"{name}{spec[0]}"
    path.write_text(spec[1])
    return path


@pytest.mark.parametrize("pair", PAIRS, ids=[p.id for p in PAIRS])
def test_config_pairs(tmp_path: Path, pair: Pair) -> None:
    ref = _write(tmp_path, "reference", pair.ref)
    new = _write(tmp_path, "intended", pair.new)
    finding = check_config_diff(
        load_config(new), repo=tmp_path, reference=ref, explain=pair.explain, now=NOW
    )
    text = "\n".join(finding.details)
    assert finding.verdict is pair.verdict, text
    for phrase in pair.must:
        assert phrase in text
    for phrase in pair.must_not:
        assert phrase not in text
    assert "reference" in finding.saw and "intended" in finding.saw


def test_pair_table_covers_formats_and_verdicts() -> None:
    formats = {s for p in PAIRS for s in (p.ref[0], p.new[0])}
    assert formats == {Y, J, T}
    assert len(PAIRS) >= 15
    assert {p.verdict for p in PAIRS} == {Verdict.PASS, Verdict.WARN, Verdict.FAIL}


@pytest.mark.parametrize(
    ("suffix", "text", "line"),
    [
        (".yaml", "seed: 1\nmodel:\n  name: [resnet\nlr: 0.1\n", 4),
        (".yml", "seed: 1\n  lr: 2\n", 2),
        (".json", '{\n  "seed": 1,\n  "lr": ,\n}\n', 3),
        (".toml", "seed = 1\n[optim]\nlr = = 0.1\n", 3),
        (".yaml", "- a list\n- not a mapping\n", 1),
    ],
)
def test_broken_intended_config_fails_naming_file_and_line(
    tmp_path: Path, suffix: str, text: str, line: int
) -> None:
    from producer.preflight.configs import ConfigParseError

    path = tmp_path / f"broken{suffix}"
    path.write_text(text)
    with pytest.raises(ConfigParseError) as caught:
        load_config(path)
    finding = check_config_diff(caught.value, repo=tmp_path, reference=None, explain={}, now=NOW)
    assert finding.verdict is Verdict.FAIL
    assert f"{path}:{line}:" in finding.saw


def test_broken_reference_fails_naming_it(tmp_path: Path) -> None:
    ref = tmp_path / "ref.toml"
    ref.write_text("seed = 1\nlr = [\n")
    new = _write(tmp_path, "new", (Y, "seed: 1\n"))
    finding = check_config_diff(load_config(new), repo=tmp_path, reference=ref, explain={}, now=NOW)
    assert finding.verdict is Verdict.FAIL
    assert "the reference does not parse" in finding.saw and str(ref) in finding.saw


def test_good_config_parses_with_lines_and_why_notes(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("optim:\n  lr: 0.1  # why: tuned\n  wd: 0.05 # not a why\nurl: 'a # b'\n")
    loaded = load_config(path)
    assert loaded.data == {"optim": {"lr": 0.1, "wd": 0.05}, "url": "a # b"}
    assert loaded.key_lines["optim.lr"] == 2
    assert loaded.why_for("optim.lr") == "tuned"
    assert loaded.why_for("optim.wd") is None
