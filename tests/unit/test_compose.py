"""compose.yaml is checked as data (docker does not run here): the services colabq needs, one
beat, scalable workers, healthy Redis first, no secret in any environment, real commands."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.main import get_command

from producer.cli import app

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def test_services_present(compose: dict) -> None:
    assert set(compose["services"]) == {"redis", "worker", "beat", "flower"}


def test_exactly_one_beat_and_scalable_workers(compose: dict) -> None:
    beat = compose["services"]["beat"]
    assert beat["deploy"]["replicas"] == 1
    worker = compose["services"]["worker"]
    # A fixed container name or a published port would stop `--scale worker=N`.
    assert "container_name" not in worker and "ports" not in worker


def test_everything_waits_for_a_healthy_redis(compose: dict) -> None:
    assert "healthcheck" in compose["services"]["redis"]
    for name in ("worker", "beat", "flower"):
        dep = compose["services"][name]["depends_on"]["redis"]
        assert dep["condition"] == "service_healthy", name


def test_no_secret_in_environment(compose: dict) -> None:
    for name, svc in compose["services"].items():
        for key, value in (svc.get("environment") or {}).items():
            assert "TOKEN" not in key.upper() or key.endswith("_FILE"), (name, key)
            assert not str(value).startswith("hf_"), (name, key)
    assert "hf_token" in compose["secrets"]


def test_commands_exist(compose: dict) -> None:
    names = set(get_command(app).commands)  # type: ignore[attr-defined]
    for svc in ("worker", "beat"):
        cmd = compose["services"][svc]["command"]
        assert cmd[0] == "colabq" and cmd[1] in names, cmd
    flower = compose["services"]["flower"]["command"]
    assert flower[:3] == ["celery", "-A", "worker.celery_app"] and "flower" in flower


def test_referenced_files_exist(compose: dict) -> None:
    assert (ROOT / "Dockerfile").is_file()
    for svc in compose["services"].values():
        for vol in svc.get("volumes") or ():
            src = vol.split(":")[0]
            if src.startswith("./ops/") and "$" not in src and not src.endswith("colab-home"):
                assert (ROOT / src).exists(), src
