"""The final report names the job's code and each known breakage of its environment with the
repair, and says whether it was applied or how to opt in."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from producer.render import final_report


def rendered(report: dict[str, Any]) -> str:
    console = Console(width=400, record=True)
    console.print(final_report(report))
    return console.export_text()


def report(breakages: list[dict[str, Any]], opted: list[str]) -> dict[str, Any]:
    return {
        "outcome": "SUCCEEDED",
        "code": {
            "mode": "git",
            "commit": "a" * 40,
            "source": "https://git.example/r.git",
            "subdir": "train",
            "on_vm": True,
        },
        "environment": {
            "synced": True,
            "sync_s": 1.2,
            "python": "3.11.7",
            "repairs_opted_in": opted,
            "breakages": breakages,
        },
    }


TORCH = {
    "name": "torch-cuda",
    "found": "torch 2.5.0 built for CUDA 12.8, the driver has CUDA 12.4",
    "repair": "uv pip install torch==2.5.0 --index-url https://download.pytorch.org/whl/cu124",
}


def test_a_breakage_not_opted_in_is_named_with_its_repair_and_how_to_opt_in() -> None:
    text = rendered(report([{**TORCH, "applied": False}], []))
    assert "git aaaaaaaaaaaa from https://git.example/r.git, started in train" in text
    assert "uv sync --frozen in 1.2s, python 3.11.7" in text
    assert "torch-cuda: torch 2.5.0 built for CUDA 12.8" in text
    assert "repair: uv pip install torch==2.5.0" in text
    assert "add `repairs: [torch-cuda]`" in text


def test_an_applied_repair_says_so() -> None:
    text = rendered(report([{**TORCH, "applied": True}], ["torch-cuda"]))
    assert "repaired on the VM (uv.lock unchanged)" in text
    assert "add `repairs:" not in text


def test_code_not_on_the_vm_and_an_environment_not_ready() -> None:
    r = report([], [])
    r["code"] = {**r["code"], "on_vm": False, "reason": "commit not fetchable"}
    r["environment"] = {"synced": False, "reason": "uv sync --frozen failed"}
    text = rendered(r)
    assert "not on the VM (commit not fetchable)" in text
    assert "not ready: uv sync --frozen failed" in text


def test_a_job_without_code_has_no_code_rows() -> None:
    text = rendered({"outcome": "SUCCEEDED"})
    labels = [line.split("│")[1].strip() for line in text.splitlines() if line.count("│") > 2]
    assert "outcome" in labels
    assert not {"code", "environment", "breakage"} & set(labels)
