"""`colabq worker --gpu TYPE`: a type that is not a Colab GPU is refused in one line before
anything starts (a worker serving gpu.v100 would wait forever); real types start the worker on
their queues. Celery's worker is replaced by a recorder: nothing here consumes a queue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import producer.commands.worker
from producer.cli import app

runner = CliRunner()


class Started:
    def __init__(self) -> None:
        self.argv: list[str] | None = None

    def __call__(self, settings: Any) -> Any:
        started = self

        class App:
            def worker_main(self, argv: list[str]) -> None:
                started.argv = argv

        return App()


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> Started:
    s = Started()
    monkeypatch.setattr(producer.commands.worker, "build_app", s)
    monkeypatch.setenv("COLABQ_WORKER_GPUS", "T4")  # the command sets it for its pool: restored
    return s


@pytest.mark.parametrize("gpus", [["V100"], ["T4", "v100"], ["A100,L4"], [""]])
def test_a_gpu_type_colab_has_not_is_refused_before_starting(
    env: dict[str, str | None], tmp_path: Path, started: Started, gpus: list[str]
) -> None:
    argv = ["worker"] + [a for g in gpus for a in ("--gpu", g)]
    result = runner.invoke(app, argv, env={**env, "COLABQ_STATE_DIR": str(tmp_path / "state")})
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and "is not a Colab GPU type" in lines[0], lines
    assert "T4, L4, G4, A100, H100" in lines[0]
    assert started.argv is None and not (tmp_path / "state").exists()


def test_real_gpu_types_start_the_worker_on_their_queues(
    env: dict[str, str | None], tmp_path: Path, started: Started
) -> None:
    run_env = {**env, "COLABQ_STATE_DIR": str(tmp_path / "state"), "COLABQ_QUEUE_PREFIX": "x."}
    result = runner.invoke(app, ["worker", "--gpu", "t4", "--gpu", "L4"], env=run_env)
    assert result.exit_code == 0, result.output
    assert started.argv is not None
    assert started.argv[started.argv.index("-Q") + 1] == "x.gpu.t4,x.gpu.l4"
