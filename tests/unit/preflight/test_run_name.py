"""Run-name discipline: planning labels, bare counters, short names and unsafe names."""

from __future__ import annotations

import pytest

from producer.preflight.report import Verdict
from producer.preflight.run_name import check_run_name, suggest_safe

# (name, verdict, a phrase the reason must contain)
CASES = [
    # the spec's good examples, and more like them: must pass
    ("7src-fastvit-s-featmap-mlp-dinov3", Verdict.PASS, "describes the experiment"),
    ("coco-baseline-bs256-lr3e-4", Verdict.PASS, "describes the experiment"),
    ("swin-t-imagenet-distill-from-vit-l", Verdict.PASS, "describes the experiment"),
    ("cifar10-resnet18-mixup-cosine", Verdict.PASS, "describes the experiment"),
    ("glue_sst2.bert-base.lr2e-5", Verdict.PASS, "describes the experiment"),
    ("imagenet-vit-b16-two-stage-finetune", Verdict.PASS, "describes the experiment"),
    # planning-session labels
    ("wave-2", Verdict.FAIL, "planning step"),
    ("phase2-internal", Verdict.FAIL, "planning step"),
    ("coco-detr-r50-phase-3", Verdict.FAIL, "planning step"),
    ("vit-b16-imagenet-stage-2", Verdict.FAIL, "planning step"),
    ("imagenet-resnet50-internal-only", Verdict.FAIL, "internal-only"),
    ("coco-yolo-m3-only-mosaic", Verdict.FAIL, "milestone-only"),
    ("librispeech-conformer-ctc-gated", Verdict.FAIL, "gating"),
    # bare counters and placeholders
    ("run-1", Verdict.FAIL, "bare counter"),
    ("exp3", Verdict.FAIL, "bare counter"),
    ("test", Verdict.FAIL, "bare counter"),
    ("final_v2", Verdict.FAIL, "bare counter"),
    # too short to say what the experiment is
    ("cs-ad", Verdict.WARN, "too short"),
    ("resnet50-cifar10", Verdict.WARN, "too short"),
    # unsafe as a path segment or a Hub path
    ("coco/resnet50-bs256", Verdict.FAIL, "path separator"),
    ("coco\\resnet50-bs256", Verdict.FAIL, "path separator"),
    (".coco-resnet50-bs256", Verdict.FAIL, "starts with '.'"),
    ("coco-resnet50..bs256-x", Verdict.FAIL, "'..'"),
    ("coco resnet50 bs256", Verdict.FAIL, "whitespace"),
    ("coco-resnet50-bs256\x00", Verdict.FAIL, "control characters"),
    ("coco-resnet50-bs256:v2", Verdict.FAIL, "outside [A-Za-z0-9._-]"),
    ("coco-" + "resnet50-" * 11, Verdict.FAIL, "over 96"),
    ("-coco-resnet50-bs256", Verdict.FAIL, "command-line option"),
    ("", Verdict.FAIL, "empty"),
]


@pytest.mark.parametrize(("name", "verdict", "phrase"), CASES, ids=[repr(c[0])[:40] for c in CASES])
def test_run_name_rules(name: str, verdict: Verdict, phrase: str) -> None:
    finding = check_run_name(name)
    assert finding.verdict is verdict
    assert phrase in " ".join((finding.saw, *finding.details))
    if verdict is Verdict.PASS:
        assert finding.next_action == "none"
    else:
        assert "<dataset/task>-<model>" in finding.next_action


def test_case_table_is_big_enough() -> None:
    assert sum(1 for c in CASES if c[1] is Verdict.PASS) >= 5
    assert len(CASES) >= 20


@pytest.mark.parametrize(
    ("name", "safe"),
    [("coco/resnet50 bs256", "coco-resnet50-bs256"), (".hidden..run--x-", "hidden.run-x")],
)
def test_unsafe_names_get_a_safe_suggestion(name: str, safe: str) -> None:
    assert suggest_safe(name) == safe
    assert repr(safe) in check_run_name(name).next_action
